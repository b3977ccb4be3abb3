"""`oncely explain`: why a schedule did or did not fire."""

from __future__ import annotations

from typing import Any

import click

from oncely.cli.loading import app_in_use
from oncely.cli.options import TENANT_OF_KEY, as_json, scoped, tenant_option
from oncely.cli.output import occurrence_document, print_json, trigger_text
from oncely.engine import Explanation
from oncely.recurrence import Instance, describe_dst


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
    notes), its recent occurrences with their reasons, and who holds it now."""
    with app_in_use(app_spec, key=key, tenant=tenant) as app:
        source = scoped(app, tenant)
        explained = source.explain(key, upcoming=upcoming, recent=recent)
    if json_output:
        print_json(_document(explained))
    else:
        click.echo(str(explained))


def _document(explained: Explanation) -> dict[str, Any]:
    s = explained.schedule
    return {
        "key": s.key,
        "job": s.job,
        "tenant": s.tenant,
        "trigger": trigger_text(s.trigger),
        "trigger_spec": None if s.trigger is None else s.trigger.to_spec(),
        "status": s.status,
        "status_reason": s.status_reason,
        "paused": s.paused,
        "state": explained.state,
        "next_run_at": s.next_run_at,
        "now": explained.now,
        "upcoming": [_instance(i) for i in explained.upcoming],
        "running": [occurrence_document(o) for o in explained.running],
        "recent": [occurrence_document(o) for o in explained.recent],
    }


def _instance(instance: Instance) -> dict[str, Any]:
    return {"at": instance.at, "local": instance.local, "dst": describe_dst(instance)}
