"""`oncely jobs`: every schedule, when it runs next and where it stands; and jobs with none."""

from __future__ import annotations

import shlex
from typing import Any, cast

import click

from oncely.app import DEFAULT_PAGE, App
from oncely.cli.loading import app_in_use
from oncely.cli.options import as_json, tenant_option
from oncely.cli.output import NOTHING, Column, print_json, print_table, when
from oncely.engine import (
    is_overdue,
    schedule_document,
    schedule_state,
    trigger_text,
    worker_seen_at,
    worker_words,
)
from oncely.model import Schedule, ScheduleStatus

NO_SCHEDULE = "no schedule"


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@tenant_option("List only this tenant's schedules (default: every tenant's).")
@click.option("--job", "job_name", default=None, help="Only the schedules of this job.")
@click.option(
    "--state", "state", type=click.Choice(["active", "ended", "invalid"]), default=None,
    help="Only the schedules in this state.",
)  # fmt: skip
@click.option("--prefix", default=None, help="Only the keys that start with this.")
@click.option(
    "--limit", default=DEFAULT_PAGE, show_default=True, type=click.IntRange(1, None),
    help="At most this many schedules (one page).",
)  # fmt: skip
@click.option("--after", "after_key", default=None, help="The page after this key.")
@click.option("--after-tenant", default=None, help="The tenant of --after's key (default: none).")
@as_json
def jobs(
    app_spec: str,
    tenant: str | None,
    job_name: str | None,
    state: str | None,
    prefix: str | None,
    limit: int,
    after_key: str | None,
    after_tenant: str | None,
    json_output: bool,
) -> None:
    """List the schedules: key, job, next run (UTC), state, tenant and trigger.

    One page at a time, by tenant and key: a full page ends with the options that show the
    next. Jobs declared in code that nothing schedules are listed too, as "no schedule": ones
    declared with @app.job() that no schedule (of the tenant, with --tenant) runs, and ones
    declared with a trigger whose schedule no worker has saved yet.
    """
    after = None if after_key is None else (after_tenant or tenant, after_key)
    filtered = job_name is not None or state is not None or prefix is not None
    with app_in_use(app_spec) as app:
        now = app.now()
        schedules = app.schedules(
            tenant,
            job=job_name,
            status=cast(ScheduleStatus | None, state),
            key_prefix=prefix,
            after=after,
            limit=limit,
        )
        last_page = len(schedules) < limit
        idle = _unscheduled(app, tenant) if last_page and not filtered else []
        overdue = sum(is_overdue(s, now) for s in schedules)
        seen = worker_seen_at(app.store.code_versions(1)) if overdue else None
        declared = bool(app.jobs)
    if json_output:
        print_json([schedule_document(s, now) for s in schedules] + idle)
        return
    show_tenant = tenant is None and any(s.tenant is not None for s in schedules)
    columns = [
        Column("key", "cut", 24),
        Column("job", "cut", 12),
        Column("next run (UTC)"),
        Column("state", "cut", 11),
        *([Column("tenant", "cut", 10)] if show_tenant else []),
        Column("trigger", "wide"),
    ]
    rows = []
    for s in schedules:
        tenant_cell = [s.tenant or NOTHING] if show_tenant else []
        rows.append(
            [s.key, s.job, when(s.next_run_at), schedule_state(s, now), *tenant_cell, _trigger(s)]
        )
    for job in idle:
        tenant_cell = [NOTHING] if show_tenant else []
        rows.append(
            [NOTHING, job["job"], NOTHING, NO_SCHEDULE, *tenant_cell, job["trigger"] or NOTHING]
        )
    if not declared:
        module = app_spec.partition(":")[0]
        click.echo(
            f"no jobs are declared on {app_spec}: is the module that declares them imported "
            f"by {module}?"
        )
    if not rows:
        click.echo("no jobs and no schedules" + (f" in tenant {tenant!r}" if tenant else ""))
        return
    print_table(columns, rows)
    if overdue:
        runs = "next run is" if overdue == 1 else "next runs are"
        click.echo(f"{overdue} {runs} overdue: {worker_words(seen, now)}")
    if len(schedules) == limit:
        last = schedules[-1]
        more = f"--after {shlex.quote(last.key)}"
        if last.tenant is not None and last.tenant != tenant:
            more += f" --after-tenant {shlex.quote(last.tenant)}"
        click.echo(f"{limit} schedules shown; the next page: {more}")


def _trigger(schedule: Schedule) -> str:
    if schedule.trigger is None and schedule.status_reason:
        return f"unreadable: {schedule.status_reason}"
    return trigger_text(schedule.trigger)


def _unscheduled(app: App, tenant: str | None) -> list[dict[str, Any]]:
    """The app's jobs that no schedule (of ``tenant``, if given) runs, as JSON-ready documents;
    asked of the store per job, not read off one page of the listing.

    A job declared with a trigger has its own schedule, outside any tenant, keyed by its name:
    it is unscheduled until a worker saves that schedule, and never listed for one tenant.
    """
    idle = []
    for name, job in sorted(app.jobs.items()):
        if job.trigger is None:
            if app.schedules(tenant, job=name, limit=1):
                continue
        elif tenant is not None or any(
            s.key == name and s.tenant is None and s.origin == "code"
            for s in app.schedules(job=name, key_prefix=name, limit=None)
        ):
            continue
        idle.append(
            {
                "key": None,
                "job": name,
                "trigger": None if job.trigger is None else trigger_text(job.trigger),
                "trigger_spec": None if job.trigger is None else job.trigger.to_spec(),
                "next_run_at": None,
                "paused": False,
                "paused_until": None,
                "status": NO_SCHEDULE,
                "status_reason": None,
                "overdue": False,
                "tenant": None,
                "origin": "code",
            }
        )
    return idle
