"""`oncely history`: did it run? When, where, after how many attempts, and if not, why not."""

from __future__ import annotations

from typing import get_args

import click

from oncely.app import App
from oncely.cli.loading import app_in_use
from oncely.cli.moment import Moment, at, time_option
from oncely.cli.options import as_json, scoped, tenant_option
from oncely.cli.output import NOTHING, Column, print_json, print_table, when
from oncely.engine import occurrence_document, summary
from oncely.errors import UnknownSchedule
from oncely.model import OccurrenceStatus

_STATUSES = get_args(OccurrenceStatus)
_TABLE_ERROR = 100


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.argument("key", required=False)
@click.option("--status", type=click.Choice(_STATUSES), help="Only occurrences in this status.")
@time_option("--since", "Only occurrences scheduled at or after this.")
@time_option("--until", "Only occurrences scheduled before this.")
@click.option(
    "--limit", default=100, show_default=True, type=click.IntRange(min=1),
    help="At most this many occurrences, the newest.",
)  # fmt: skip
@tenant_option("Only this tenant's occurrences (default: every tenant's).")
@as_json
def history(
    app_spec: str,
    key: str | None,
    status: OccurrenceStatus | None,
    since: Moment | None,
    until: Moment | None,
    limit: int,
    tenant: str | None,
    json_output: bool,
) -> None:
    """List occurrences, newest first: of every schedule, or of schedule KEY.

    Each shows when it was scheduled, its status, how many attempts it took, on which worker
    (or, when several tenants are listed, whose it is), and its error (the exception's line) or
    the reason it did not run, on one line. Times are UTC; --json has every field, the start,
    the finish, the worker and the whole error included. --since and --until select by
    scheduled time.
    """
    with app_in_use(app_spec, key=key, tenant=tenant) as app:
        now = app.now()
        start = None if since is None else at(since, now, "--since")
        end = None if until is None else at(until, now, "--until")
        if start is not None and end is not None and start > end:
            raise click.BadParameter(
                f"--since {when(start)} is after --until {when(end)}; swap them",
                param_hint="--since/--until",
            )
        source = scoped(app, tenant)
        found = source.history(key, since=start, until=end, status=status, limit=limit)
        if key is not None and not found and not _exists(app, tenant, key):
            raise UnknownSchedule(f"no schedule has key {key!r}")
    if json_output:
        print_json([occurrence_document(o) for o in found])
        return
    if not found:
        click.echo("no occurrences match")
        return
    show_tenant = tenant is None and any(o.tenant is not None for o in found)
    columns = [
        Column("scheduled (UTC)"),
        Column("key", "cut", 18),
        Column("status", "cut", 9),
        Column("tries"),
        # 80 columns hold a tenant or a worker beside a readable key, not both
        Column("tenant", "cut", 10) if show_tenant else Column("worker", "cut", 12),
        Column("error or reason", "wide"),
    ]
    rows = []
    for o in found:
        row = [
            when(o.scheduled_for),
            o.key,
            o.status,
            str(o.attempts),
            (o.tenant if show_tenant else o.worker) or NOTHING,
            summary(o.error, _TABLE_ERROR) or o.reason or "",
        ]
        rows.append(row)
    print_table(columns, rows)
    if len(found) == limit:
        click.echo(f"the newest {limit} shown; a larger --limit shows more")


def _exists(app: App, tenant: str | None, key: str) -> bool:
    """Whether a schedule has ``key`` (in ``tenant``, or in any tenant when None)."""
    found = app.schedules(tenant, key_prefix=key, limit=None)
    return any(s.key == key for s in found)
