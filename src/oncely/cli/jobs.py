"""`oncely jobs`: every schedule, when it runs next and where it stands; and jobs with none."""

from __future__ import annotations

import shlex
from typing import Any, cast

import click

from oncely.app import DEFAULT_PAGE, App
from oncely.cli.loading import app_in_use
from oncely.cli.options import as_json, tenant_option
from oncely.cli.output import (
    NOTHING,
    Column,
    print_json,
    print_table,
    stacked,
    trigger_text,
    when,
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
    """List the schedules: key, job, trigger, next run (UTC), state and tenant.

    One page at a time, by tenant and key: a full page ends with the options that show the
    next. Jobs declared in code that nothing schedules are listed too, as "no schedule": ones
    declared with @app.job() that no schedule (of the tenant, with --tenant) runs, and ones
    declared with a trigger whose schedule no worker has saved yet.
    """
    after = None if after_key is None else (after_tenant or tenant, after_key)
    filtered = job_name is not None or state is not None or prefix is not None
    with app_in_use(app_spec) as app:
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
    if json_output:
        print_json([_document(s) for s in schedules] + idle)
        return
    show_tenant = tenant is None and any(s.tenant is not None for s in schedules)
    columns = [
        Column(stacked("key", "job"), "fold", 20),
        Column("next run (UTC)"),
        Column(stacked("state", "tenant") if show_tenant else "state", "fold", 12),
        Column("trigger", "wide"),
    ]
    rows = []
    for s in schedules:
        state = stacked(_state(s), s.tenant or NOTHING) if show_tenant else _state(s)
        rows.append([stacked(s.key, s.job), when(s.next_run_at), state, _trigger(s)])
    for job in idle:
        state = stacked(NO_SCHEDULE, NOTHING) if show_tenant else NO_SCHEDULE
        rows.append([stacked(NOTHING, job["job"]), NOTHING, state, job["trigger"] or NOTHING])
    if not rows:
        click.echo("no jobs and no schedules" + (f" in tenant {tenant!r}" if tenant else ""))
        return
    print_table(columns, rows)
    if len(schedules) == limit:
        last = schedules[-1]
        more = f"--after {shlex.quote(last.key)}"
        if last.tenant is not None and last.tenant != tenant:
            more += f" --after-tenant {shlex.quote(last.tenant)}"
        click.echo(f"{limit} schedules shown; the next page: {more}")


def _state(schedule: Schedule) -> str:
    if schedule.paused and schedule.status != "active":
        return f"{schedule.status}, paused"
    return "paused" if schedule.paused else schedule.status


def _trigger(schedule: Schedule) -> str:
    if schedule.trigger is None and schedule.status_reason:
        return f"unreadable: {schedule.status_reason}"
    return trigger_text(schedule.trigger)


def _document(schedule: Schedule) -> dict[str, Any]:
    trigger = schedule.trigger
    return {
        "key": schedule.key,
        "job": schedule.job,
        "trigger": trigger_text(trigger),
        "trigger_spec": None if trigger is None else trigger.to_spec(),
        "next_run_at": schedule.next_run_at,
        "paused": schedule.paused,
        "status": schedule.status,
        "status_reason": schedule.status_reason,
        "tenant": schedule.tenant,
        "origin": schedule.origin,
    }


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
                "status": NO_SCHEDULE,
                "status_reason": None,
                "tenant": None,
                "origin": "code",
            }
        )
    return idle
