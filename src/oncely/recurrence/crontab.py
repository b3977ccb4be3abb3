"""`cron(expr, tz)`: crontab expressions on the wall clock of a time zone.

Field matching is cronsim's (Vixie/Debian semantics: when both day-of-month and day-of-week are
restricted either may match). Daylight saving is oncely's: cronsim iterates naive wall times and
`wallclock.resolve_walls` applies the trigger's explicit gap and fold policies.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from cronsim import CronSim, CronSimError

from oncely.errors import InvalidSchedule
from oncely.recurrence.lenient import input_key, warn_once
from oncely.recurrence.trigger import SPEC_VERSION, Trigger
from oncely.recurrence.wallclock import (
    DstFold,
    DstGap,
    Instance,
    Zone,
    check_policies,
    resolve_walls,
)

logger = logging.getLogger("oncely.recurrence")

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_FIELDS_5 = ("minute", "hour", "day-of-month", "month", "day-of-week")
_FIELDS_6 = ("second", *_FIELDS_5)
_EXAMPLES = {
    "second": "0-59, e.g. 0 or */15",
    "minute": "0-59, e.g. 0, 0,30 or */5",
    "hour": "0-23, e.g. 9, 9-17 or */2",
    "day-of-month": "1-31, L or LW, e.g. 1 or 1,15 (and a day every month has, e.g. not 30 in FEB)",
    "month": "1-12 or JAN-DEC, e.g. 1 or JAN,JUL",
    "day-of-week": "0-7 or SUN-SAT, e.g. MON-FRI, 5L (last Friday) or FRI#2 (second Friday)",
}
_PROBE = datetime(2000, 1, 1)


def validate_cron(expr: str) -> str:
    """Return ``expr`` normalised (aliases expanded, spaces collapsed) if it is a valid cron line.

    Accepts five fields (minute hour day-of-month month day-of-week), six with seconds first, and
    the aliases @yearly @annually @monthly @weekly @daily @midnight @hourly. Raises
    `InvalidSchedule` naming the field that is wrong and what a right one looks like.
    """
    if not isinstance(expr, str):
        raise InvalidSchedule(
            f"a cron expression is text, not {type(expr).__name__}", hint='e.g. "0 9 * * MON-FRI"'
        )
    expr = str.__str__(expr)  # messages use repr(), which a str subclass could override
    text = " ".join(expr.split())
    if text.startswith("@"):
        if text.lower() not in ALIASES:
            raise InvalidSchedule(
                f"unknown cron alias {text!r}",
                rule=expr,
                hint="use one of " + ", ".join(ALIASES) + " or five fields",
            )
        text = ALIASES[text.lower()]
    fields = text.split(" ") if text else []
    if len(fields) not in (5, 6):
        raise InvalidSchedule(
            f"a cron expression has 5 fields (minute hour day-of-month month day-of-week), or 6 "
            f"with seconds first; this one has {len(fields)}",
            rule=expr,
            hint='e.g. "0 9 * * MON-FRI" for 09:00 on weekdays',
        )
    try:
        CronSim(text, _PROBE)
    except CronSimError as exc:
        raise _field_error(expr, fields, str(exc)) from exc
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise InvalidSchedule(
            f"cannot read cron expression: {exc}", rule=expr, hint='e.g. "*/5 * * * *"'
        ) from exc
    return text


def _field_error(expr: str, fields: list[str], message: str) -> InvalidSchedule:
    names = _FIELDS_6 if len(fields) == 6 else _FIELDS_5
    for name, value in zip(names, fields, strict=True):
        if message == f"Bad {name}":
            return InvalidSchedule(
                f"the {name} field {value!r} is not valid", rule=expr, hint=f"use {_EXAMPLES[name]}"
            )
    return InvalidSchedule(message, rule=expr, hint='e.g. "0 9 * * MON-FRI"')


def parse_cron(expr: str) -> str | None:
    """Return ``expr`` normalised, or None (logging one WARNING per distinct bad expression).

    Never raises: the scheduler's posture, where one bad stored expression must stop only its own
    schedule.
    """
    try:
        return validate_cron(expr)
    except InvalidSchedule as exc:
        warn_once(logger, input_key("cron", expr), "ignoring invalid cron expression: %s", exc)
        return None
    except Exception as exc:  # the lenient posture never raises, whatever the input
        warn_once(
            logger,
            input_key("cron", expr),
            "ignoring unreadable cron expression: %s",
            type(exc).__name__,
        )
        return None


class Cron(Trigger):
    """Fires at the wall times a cron expression names, in time zone ``tz``."""

    kind = "cron"
    __slots__ = ("dst_fold", "dst_gap", "expr", "zone")

    def __init__(
        self,
        expr: str,
        tz: str = "UTC",
        *,
        dst_gap: DstGap = "shift",
        dst_fold: DstFold = "first",
    ) -> None:
        self.expr = validate_cron(expr)
        self.zone = Zone(tz)
        check_policies(dst_gap, dst_fold)
        self.dst_gap: DstGap = dst_gap
        self.dst_fold: DstFold = dst_fold

    def __repr__(self) -> str:
        return f"cron({self.expr!r}, tz={self.zone.name!r})"

    def _definition(self) -> tuple[Any, ...]:
        return (self.kind, self.expr, self.zone.name, self.dst_gap, self.dst_fold)

    def to_spec(self) -> dict[str, Any]:
        """Return ``{"kind": "cron", "v": 1, "expr", "tz", "dst_gap", "dst_fold"}``.

        ``expr`` is the normal form (aliases expanded, spaces collapsed).
        """
        return {
            "kind": self.kind,
            "v": SPEC_VERSION,
            "expr": self.expr,
            "tz": self.zone.name,
            "dst_gap": self.dst_gap,
            "dst_fold": self.dst_fold,
        }

    def _instances_after(self, t: datetime) -> Iterator[Instance]:
        # Walls up to t + (smallest nearby offset) can only map to instants up to t.
        start = (t + self.zone.min_offset_near(t)).replace(tzinfo=None)
        for instance in resolve_walls(
            self.zone, _walls(self.expr, start), self.dst_gap, self.dst_fold
        ):
            if instance.at > t:
                yield instance


def _walls(expr: str, start: datetime) -> Iterator[datetime]:
    try:
        yield from CronSim(expr, start)
    except (OverflowError, ValueError):  # past datetime.max: the series simply ends
        return
