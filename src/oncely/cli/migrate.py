"""`oncely migrate`: bring the app's database schema up to date, as a deploy step."""

from __future__ import annotations

import click

from oncely.cli.loading import load_app
from oncely.errors import OncelyError


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
def migrate(app_spec: str) -> None:
    """Apply the migrations the app's database has not seen (also done on first use)."""
    app = load_app(app_spec)
    try:
        applied = app.migrate()
        version = app.store.schema_version()
    except OncelyError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        app.close()
    if applied:
        click.echo(f"applied migrations {', '.join(map(str, applied))}; schema version {version}")
    else:
        click.echo(f"schema version {version}: up to date")
