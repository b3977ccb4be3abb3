"""`oncely trigger`, `oncely pause`, `oncely resume`: act on one schedule, say what happened."""

from __future__ import annotations

import click

from oncely.cli.loading import app_in_use
from oncely.cli.options import TENANT_OF_KEY, scoped, tenant_option
from oncely.cli.output import when


def _named(key: str, tenant: str | None) -> str:
    return f"{key!r}" + ("" if tenant is None else f" (tenant {tenant!r})")


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.argument("key")
@tenant_option(TENANT_OF_KEY)
def trigger(app_spec: str, key: str, tenant: str | None) -> None:
    """Run schedule KEY once now, besides its own times: the next worker tick runs it."""
    with app_in_use(app_spec, key=key, tenant=tenant) as app:
        now = app.now()
        added = scoped(app, tenant).trigger(key)
        found = app.schedules(tenant, key_prefix=key, limit=None)
        paused = any(s.paused for s in found if s.key == key and s.tenant == tenant)
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
@tenant_option(TENANT_OF_KEY)
def pause(app_spec: str, key: str, tenant: str | None) -> None:
    """Stop schedule KEY firing until `oncely resume`; its history and next run stay."""
    with app_in_use(app_spec, key=key, tenant=tenant) as app:
        scoped(app, tenant).pause(key)
    click.echo(f"paused {_named(key, tenant)}: it does not fire until `oncely resume`")


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.argument("key")
@tenant_option(TENANT_OF_KEY)
def resume(app_spec: str, key: str, tenant: str | None) -> None:
    """Let paused schedule KEY fire again; times it missed follow the job's misfire policy."""
    with app_in_use(app_spec, key=key, tenant=tenant) as app:
        now = app.now()
        schedule = scoped(app, tenant).resume(key)
    named = _named(key, tenant)
    next_run = schedule.next_run_at
    if schedule.status != "active" or next_run is None:
        click.echo(f"resumed {named}, but it is {schedule.status}: it has no next run")
    elif next_run <= now:
        click.echo(
            f"resumed {named}: due since {when(next_run)}; the job's misfire policy decides "
            "what of the missed time runs"
        )
    else:
        click.echo(f"resumed {named}: next run {when(next_run)}")
