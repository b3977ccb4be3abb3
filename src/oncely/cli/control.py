"""`oncely trigger`, `oncely pause`, `oncely resume`: act on one schedule, say what happened."""

from __future__ import annotations

from typing import Any

import click

from oncely.app import App
from oncely.cli.loading import app_in_use
from oncely.cli.moment import Moment, ahead, time_option
from oncely.cli.options import TENANT_OF_KEY, as_json, scoped, tenant_option
from oncely.cli.output import print_json, when
from oncely.model import Schedule


def _named(key: str, tenant: str | None) -> str:
    return f"{key!r}" + ("" if tenant is None else f" (tenant {tenant!r})")


def _current(app: App, tenant: str | None, key: str) -> Schedule | None:
    """Schedule ``key`` of ``tenant`` as stored now, None when there is none."""
    found = app.schedules(tenant, key_prefix=key, limit=None)
    return next((s for s in found if s.key == key and s.tenant == tenant), None)


def _document(key: str, tenant: str | None, **fields: Any) -> dict[str, Any]:
    return {"key": key, "tenant": tenant, **fields}


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.argument("key")
@tenant_option(TENANT_OF_KEY)
@as_json
def trigger(app_spec: str, key: str, tenant: str | None, json_output: bool) -> None:
    """Run schedule KEY once now, besides its own times: the next worker tick runs it."""
    with app_in_use(app_spec, key=key, tenant=tenant) as app:
        now = app.now()
        added = scoped(app, tenant).trigger(key)
        current = _current(app, tenant, key)
        paused = current is not None and current.paused
    if json_output:
        print_json(_document(key, tenant, added=added, due_at=now, paused=paused))
        return
    named = _named(key, tenant)
    if not added:
        click.echo(f"{named} already has an occurrence at {when(now)}; nothing added")
    elif paused:
        click.echo(f"triggered {named} at {when(now)}, but it is paused: it runs once resumed")
    else:
        click.echo(f"triggered {named}: due at {when(now)}, the next worker tick runs it")


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.argument("key")
@time_option("--until", "Resume by itself at this time.", forward=True)
@tenant_option(TENANT_OF_KEY)
@as_json
def pause(
    app_spec: str, key: str, until: Moment | None, tenant: str | None, json_output: bool
) -> None:
    """Stop schedule KEY firing until `oncely resume` (or --until); its history and next run
    stay."""
    with app_in_use(app_spec, key=key, tenant=tenant) as app:
        end = None if until is None else ahead(until, app.now(), "--until")
        before = _current(app, tenant, key)
        changed = before is None or not before.paused or before.paused_until != end
        schedule = scoped(app, tenant).pause(key, until=end) if changed else before
    assert schedule is not None
    named = _named(key, tenant)
    if json_output:
        print_json(
            _document(key, tenant, paused=True, paused_until=schedule.paused_until, changed=changed)
        )
    elif not changed:
        click.echo(f"{named} is already paused; nothing changed")
    elif end is not None:
        click.echo(f"paused {named} until {when(end)}: it resumes by itself then")
    else:
        click.echo(f"paused {named}: it does not fire until `oncely resume`")


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.argument("key")
@tenant_option(TENANT_OF_KEY)
@as_json
def resume(app_spec: str, key: str, tenant: str | None, json_output: bool) -> None:
    """Let paused schedule KEY fire again; times it missed follow the job's misfire policy."""
    with app_in_use(app_spec, key=key, tenant=tenant) as app:
        now = app.now()
        before = _current(app, tenant, key)
        changed = before is None or before.paused
        schedule = scoped(app, tenant).resume(key) if changed else before
    assert schedule is not None
    named = _named(key, tenant)
    next_run = schedule.next_run_at
    if json_output:
        print_json(
            _document(
                key, tenant, paused=False, changed=changed, status=schedule.status,
                next_run_at=next_run,
            )
        )  # fmt: skip
    elif not changed:
        click.echo(f"{named} is not paused; nothing changed")
    elif schedule.status != "active" or next_run is None:
        click.echo(f"resumed {named}, but it is {schedule.status}: it has no next run")
    elif next_run <= now:
        click.echo(
            f"resumed {named}: due since {when(next_run)}; the job's misfire policy decides "
            "what of the missed time runs"
        )
    else:
        click.echo(f"resumed {named}: next run {when(next_run)}")
