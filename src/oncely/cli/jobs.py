"""`oncely jobs`: every schedule, when it runs next and where it stands; and jobs with none."""

from __future__ import annotations

from typing import Any

import click

from oncely.app import App
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
from oncely.model import Schedule

NO_SCHEDULE = "no schedule"


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@tenant_option("List only this tenant's schedules (default: every tenant's).")
@as_json
def jobs(app_spec: str, tenant: str | None, json_output: bool) -> None:
    """List the schedules: key, job, trigger, next run (UTC), state and tenant.

    Jobs declared in code that nothing schedules are listed too, as "no schedule": ones
    declared with @app.job() that no schedule (of the tenant, with --tenant) runs, and ones
    declared with a trigger whose schedule no worker has saved yet.
    """
    with app_in_use(app_spec) as app:
        schedules = app.schedules(tenant)
        idle = _unscheduled(app, schedules, tenant)
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


def _unscheduled(app: App, schedules: list[Schedule], tenant: str | None) -> list[dict[str, Any]]:
    """The app's jobs that no listed schedule runs, as JSON-ready documents.

    A job declared with a trigger has its own schedule, outside any tenant, keyed by its name:
    it is unscheduled until a worker saves that schedule, and never listed for one tenant.
    """
    own = {s.key for s in schedules if s.tenant is None and s.origin == "code"}
    used = {s.job for s in schedules}
    idle = []
    for name, job in sorted(app.jobs.items()):
        if job.trigger is None:
            if name in used:
                continue
        elif tenant is not None or name in own:
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
