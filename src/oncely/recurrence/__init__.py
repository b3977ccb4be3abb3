"""When things happen: triggers, time zones and DST, and rules that survive bad input.

Every trigger answers ``next_after(t)`` (strictly after ``t``) and ``between(a, b)`` (in (a, b]),
aware UTC in and out; ``instances_after`` and ``instances_between`` add each occurrence's
resolved wall time, fold and DST note. ``to_spec`` turns a trigger into JSON-ready data and
``trigger_from_spec`` rebuilds an equal one from it, in any process.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from oncely.recurrence.crontab import Cron, parse_cron, validate_cron
from oncely.recurrence.interval import EPOCH, Every
from oncely.recurrence.oneoff import At
from oncely.recurrence.rfc5545 import Rule, parse_rrule, validate_rrule
from oncely.recurrence.rule_trigger import DEFAULT_MAX_SPAN, RRule
from oncely.recurrence.spec import trigger_from_spec
from oncely.recurrence.trigger import SPEC_VERSION, Trigger
from oncely.recurrence.wallclock import (
    DstFold,
    DstGap,
    Instance,
    Zone,
    as_utc,
    describe_dst,
)

__all__ = [
    "DEFAULT_MAX_SPAN",
    "EPOCH",
    "SPEC_VERSION",
    "At",
    "Cron",
    "DstFold",
    "DstGap",
    "Every",
    "Instance",
    "RRule",
    "Rule",
    "Trigger",
    "Zone",
    "as_utc",
    "at",
    "cron",
    "describe_dst",
    "every",
    "parse_cron",
    "parse_rrule",
    "rrule",
    "trigger_from_spec",
    "validate_cron",
    "validate_rrule",
]


def cron(
    expr: str, tz: str = "UTC", *, dst_gap: DstGap = "shift", dst_fold: DstFold = "first"
) -> Cron:
    """A cron expression on the wall clock of ``tz``; raises `InvalidSchedule` if it is bad."""
    return Cron(expr, tz, dst_gap=dst_gap, dst_fold=dst_fold)


def every(*, seconds: float = 0, minutes: float = 0, hours: float = 0, days: float = 0) -> Every:
    """A fixed period of elapsed time, anchored to 1970-01-01T00:00Z for every process."""
    return Every(seconds=seconds, minutes=minutes, hours=hours, days=days)


def rrule(
    text: str | Rule,
    start: datetime | None = None,
    tz: str | None = None,
    end: datetime | None = None,
    max_span: timedelta | None = DEFAULT_MAX_SPAN,
    *,
    dst_gap: DstGap = "shift",
    dst_fold: DstFold = "first",
    schedule: str | None = None,
) -> RRule:
    """An RFC 5545 rule on the wall clock of ``tz`` (UTC unless given or in a DTSTART line).

    Raises `InvalidSchedule` for a bad rule; see `RRule` for bounds and DST.
    """
    return RRule(
        text, start, tz, end, max_span, dst_gap=dst_gap, dst_fold=dst_fold, schedule=schedule
    )


def at(when: datetime) -> At:
    """A single aware instant."""
    return At(when)
