"""`oncely preview`: the next occurrences of a rule, for a person checking it."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import click

from oncely.cli.options import as_json
from oncely.cli.output import print_json
from oncely.engine import explain_cron
from oncely.errors import InvalidSchedule
from oncely.recurrence import Cron, Instance, RRule, Zone, cron, describe_dst, rrule

_NEAR = timedelta(hours=24)


def _looks_like_rrule(text: str) -> bool:
    upper = text.upper()
    return "FREQ=" in upper or upper.lstrip().startswith(("RRULE:", "DTSTART"))


def _read_time(value: str, zone: Zone) -> datetime:
    """Read an ISO 8601 time; one without an offset is a wall time in ``zone``."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(
            f"{value!r} is not an ISO 8601 time; e.g. 2026-03-27T00:00:00 or 2026-03-27T00:00Z"
        ) from exc
    if moment.tzinfo is None:
        return zone.resolve(moment, "shift", "first")[0].at
    return moment.astimezone(UTC)


def _note(instance: Instance, zone: Zone) -> str:
    described = describe_dst(instance)
    if described is not None:
        return described
    changes = zone.transitions_between(instance.at - _NEAR, instance.at + _NEAR)
    if changes:
        when, offset = changes[0]
        old = zone.offset_at(when - timedelta(seconds=1))
        return (
            f"DST change within 24 h: on {when + old:%a %Y-%m-%d} clocks go from "
            f"{when + old:%H:%M} to {when + offset:%H:%M} "
            f"(UTC{_offset(old)} to UTC{_offset(offset)})"
        )
    return ""


def _offset(offset: timedelta) -> str:
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@click.command()
@click.argument("rule")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone of the rule.")
@click.option(
    "-n", "count", default=10, show_default=True, type=click.IntRange(1, 1000),
    help="How many occurrences to show.",
)  # fmt: skip
@click.option(
    "--start",
    default=None,
    help="ISO time to list from (a rule's DTSTART too); without an offset it is local to --tz. "
    "Default: now, which is also a rule's DTSTART, as when a schedule is saved now.",
)
@as_json
def preview(rule: str, tz: str, count: int, start: str | None, json_output: bool) -> None:
    """Show the next occurrences of RULE (an RRULE or a cron expression).

    Times are shown in local time and UTC; occurrences next to a daylight-saving change are
    marked. A rule that is not valid prints what is wrong and exits with status 2.
    """
    try:
        zone = Zone(tz)
        now = datetime.now(UTC).replace(microsecond=0)
        since = _read_time(start, zone) if start else now
        trigger: RRule | Cron
        if _looks_like_rrule(rule):
            # Without --start a rule counts from now, as saving it now would: from today's
            # midnight, FREQ=DAILY;COUNT=3 listed two, its first already past.
            dtstart = since
            has_own_start = "DTSTART" in rule.upper()
            trigger = rrule(
                rule,
                start=None if has_own_start else dtstart,
                tz=None if has_own_start else tz,
                max_span=None,
            )
            summary = "RRULE"
            zone = trigger.zone
        else:
            trigger = cron(rule, tz)
            summary = "cron: " + explain_cron(trigger.expr)
        instances = []
        for instance in trigger.instances_from(since):
            instances.append(instance)
            if len(instances) == count:
                break
    except InvalidSchedule as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)

    shown = " / ".join(line.strip() for line in rule.splitlines() if line.strip())
    if json_output:
        occurrences = [
            {"at": i.at, "local": i.local, "note": _note(i, zone) or None} for i in instances
        ]
        print_json({"rule": shown, "kind": summary, "zone": zone.name, "occurrences": occurrences})
        return
    click.echo(f"{shown}  [{summary}, zone {zone.name}]")
    if not instances:
        click.echo("  no occurrences after " + since.isoformat())
        return
    for number, instance in enumerate(instances, 1):
        local = instance.local
        line = (
            f"{number:>4}  {local:%a %Y-%m-%d %H:%M:%S} {local.tzname():<6} "
            f"{_offset(local.utcoffset() or timedelta(0))}   {instance.at:%Y-%m-%d %H:%M:%S}Z"
        )
        note = _note(instance, zone)
        click.echo(f"{line}   {note}" if note else line)
