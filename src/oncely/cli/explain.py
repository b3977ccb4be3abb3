"""`oncely explain`: why a schedule did or did not fire."""

from __future__ import annotations

import click

from oncely.cli.loading import app_in_use
from oncely.cli.options import TENANT_OF_KEY, as_json, scoped, tenant_option
from oncely.cli.output import print_json


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.argument("key")
@click.option(
    "-n", "upcoming", default=5, show_default=True, type=click.IntRange(0, 1000),
    help="How many next occurrences to show.",
)  # fmt: skip
@click.option(
    "--recent", default=10, show_default=True, type=click.IntRange(0, 1000),
    help="How many recent occurrences to show.",
)  # fmt: skip
@tenant_option(TENANT_OF_KEY)
@as_json
def explain(
    app_spec: str, key: str, upcoming: int, recent: int, tenant: str | None, json_output: bool
) -> None:
    """Why schedule KEY did or did not fire: its state, its next occurrences (with daylight-saving
    notes), its recent occurrences with their reasons, who holds it now, and when a worker
    was last seen (a next run overdue says so)."""
    with app_in_use(app_spec, key=key, tenant=tenant) as app:
        source = scoped(app, tenant)
        explained = source.explain(key, upcoming=upcoming, recent=recent)
    if json_output:
        print_json(explained.document())
    else:
        click.echo(str(explained))
