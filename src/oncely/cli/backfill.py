"""`oncely backfill`: create a schedule's occurrences in a past range, each once."""

from __future__ import annotations

import click

from oncely.cli.loading import app_in_use
from oncely.cli.moment import Moment, at, time_option
from oncely.cli.options import TENANT_OF_KEY, as_json, scoped, tenant_option
from oncely.cli.output import print_json, when


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.argument("key")
@time_option("--since", "From this time, included.", required=True)
@time_option("--until", "To this time, included.", required=True)
@tenant_option(TENANT_OF_KEY)
@as_json
def backfill(
    app_spec: str, key: str, since: Moment, until: Moment, tenant: str | None, json_output: bool
) -> None:
    """Create schedule KEY's occurrences from --since to --until, for the workers to run.

    Each occurrence is created once however often this runs; one recorded as skipped (missed
    during downtime, say) is re-armed, once. The range must be in the past.
    """
    with app_in_use(app_spec, key=key, tenant=tenant) as app:
        now = app.now()
        start, end = at(since, now, "--since"), at(until, now, "--until")
        if start > end:
            raise click.BadParameter(
                f"--since {when(start)} is after --until {when(end)}; swap them",
                param_hint="--since/--until",
            )
        added = scoped(app, tenant).backfill(key, start, end)
    if json_output:
        print_json({"key": key, "tenant": tenant, "since": start, "until": end, "added": added})
        return
    where = "" if tenant is None else f" (tenant {tenant!r})"
    click.echo(
        f"backfilled {key!r}{where} from {when(start)} to {when(end)}: {added} occurrence"
        f"{'' if added == 1 else 's'} created or re-armed"
    )
