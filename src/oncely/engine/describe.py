"""What the command line and the dashboard both say about schedules and occurrences: a trigger
in words, whether a next run is overdue, when a worker was last seen, stored text made safe to
print, and the JSON documents both hand out. One place, so the two never disagree."""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import UTC, date, datetime, timedelta
from typing import Any

from cronsim import CronSim

from oncely.model import CodeVersion, Occurrence, Schedule
from oncely.recurrence import At, Cron, Every, Instance, RRule, Trigger, describe_dst

#: A next run this far in the past with no worker having taken it is overdue: workers take a
#: due occurrence within a second or two, so one still waiting a minute later has nobody to run it.
OVERDUE_AFTER = timedelta(minutes=1)

# C0 and C1 controls and DEL, bidirectional overrides and zero-width marks: a tenant holding
# "\x1b]0;...\x07" retitled the terminal of whoever ran `oncely jobs`.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\n``), so that
    stored text (keys, tenants, errors) printed to a terminal is only ever text."""
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if char in named:
        return named[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def trigger_text(trigger: Trigger | None) -> str:
    """What ``trigger`` does, in words: ``At 09:00 on Monday through Friday (Europe/Berlin)``."""
    if trigger is None:
        return "unreadable"
    if isinstance(trigger, Cron):
        return f"{explain_cron(trigger.expr)} ({trigger.zone.name})"
    if isinstance(trigger, Every):
        return "every " + _period(trigger.period)
    if isinstance(trigger, RRule):
        return f"RRULE {trigger.rule.text} ({trigger.zone.name})"
    if isinstance(trigger, At):
        return "once at " + iso_utc(trigger.when)
    return repr(trigger)


def explain_cron(expr: str) -> str:
    """A cron expression in words (``At 02:30 every day``), or the expression itself."""
    try:
        return CronSim(expr, datetime(2000, 1, 1)).explain()  # noqa: DTZ001 (naive wall time)
    except Exception:  # an explanation is a courtesy; never fail a command over it
        return expr


def _period(period: timedelta) -> str:
    seconds = int(period.total_seconds())
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    if len(parts) == 1 and parts[0].startswith("1 "):
        return parts[0][2:]
    return " ".join(parts)


def iso_utc(value: datetime) -> str:
    """``value`` as ISO 8601 in UTC to the second: ``2026-03-27T09:00:00Z``."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(then: datetime, now: datetime) -> str:
    """How long before ``now`` ``then`` was, in its largest units: ``45m ago``, ``2h 5m ago``."""
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 60:
        return f"{seconds}s ago"
    minutes, _ = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h ago" if hours else f"{days}d ago"
    if hours:
        return f"{hours}h {minutes}m ago" if minutes else f"{hours}h ago"
    return f"{minutes}m ago"


def is_overdue(schedule: Schedule, now: datetime) -> bool:
    """Whether ``schedule`` should have fired by ``now`` and nothing has taken its next run: it
    is active and not paused, and its next run is more than `OVERDUE_AFTER` in the past."""
    return (
        schedule.status == "active"
        and not schedule.paused
        and schedule.next_run_at is not None
        and schedule.next_run_at < now - OVERDUE_AFTER
    )


def worker_seen_at(versions: list[CodeVersion]) -> datetime | None:
    """When a worker (or a process calling ``tick()``) last said it runs, from the store's code
    versions (`Store.code_versions`); None when none ever has."""
    return max((v.last_seen_at for v in versions), default=None)


def worker_words(seen: datetime | None, now: datetime) -> str:
    """``a worker was last seen at 2026-03-27T12:20:00Z (45m ago)``, or that none ever was."""
    if seen is None:
        return "no worker has been seen (start one: oncely run MODULE:APP)"
    return f"a worker was last seen at {iso_utc(seen)} ({ago(seen, now)})"


def schedule_state(schedule: Schedule, now: datetime) -> str:
    """One word or two for where ``schedule`` stands: active, overdue, paused, ended, invalid."""
    if schedule.paused and schedule.status != "active":
        return f"{schedule.status}, paused"
    if schedule.paused:
        return "paused"
    if is_overdue(schedule, now):
        return "overdue"
    return schedule.status


def summary(error: str | None, limit: int | None = None) -> str:
    """The line of an error that says what went wrong, cut to ``limit`` characters.

    A plain message gives its first line. A traceback (errors are stored as such) gives the
    first line of its exception, after the last indented frame line: its own first line is
    always "Traceback (most recent call last):", which says nothing.
    """
    lines = (error or "").splitlines()
    frames = [n for n, line in enumerate(lines) if line[:1].isspace()]
    after = lines[frames[-1] + 1 :] if frames else lines
    text = next((line.strip() for line in after if line.strip()), "")
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def schedule_document(schedule: Schedule, now: datetime) -> dict[str, Any]:
    """``schedule`` for JSON: its fields, its trigger in words and as a spec, and ``overdue``."""
    trigger = schedule.trigger
    return {
        "key": schedule.key,
        "job": schedule.job,
        "trigger": trigger_text(trigger),
        "trigger_spec": None if trigger is None else trigger.to_spec(),
        "next_run_at": schedule.next_run_at,
        "paused": schedule.paused,
        "paused_until": schedule.paused_until,
        "status": schedule.status,
        "status_reason": schedule.status_reason,
        "overdue": is_overdue(schedule, now),
        "tenant": schedule.tenant,
        "origin": schedule.origin,
    }


def occurrence_document(occurrence: Occurrence) -> dict[str, Any]:
    """Every field of ``occurrence``, for JSON: the error whole, the local wall time naive."""
    return asdict(occurrence)


def instance_document(instance: Instance) -> dict[str, Any]:
    """An upcoming occurrence for JSON: its instant, its local wall time, its DST note."""
    return {"at": instance.at, "local": instance.local, "dst": describe_dst(instance)}


def json_value(value: object) -> Any:
    """The JSON form of what `json.dumps` cannot write itself: dates as ISO 8601."""
    if isinstance(value, date):  # datetimes too
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
