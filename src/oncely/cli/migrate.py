"""`oncely migrate`: bring the app's database schema up to date, as a deploy step."""

from __future__ import annotations

import click

from oncely.cli.loading import load_app
from oncely.cli.options import as_json
from oncely.cli.output import print_json
from oncely.errors import OncelyError


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@as_json
def migrate(app_spec: str, json_output: bool) -> None:
    """Apply the migrations the app's database has not seen (also done on first use)."""
    app = load_app(app_spec)
    try:
        applied = app.migrate()
        version = app.store.schema_version()
    except OncelyError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        app.close()
    if json_output:
        print_json({"applied": applied, "version": version})
    elif applied:
        click.echo(f"applied migrations {', '.join(map(str, applied))}; schema version {version}")
    else:
        click.echo(f"schema version {version}: up to date")
