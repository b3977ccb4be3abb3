"""`every(...)`: a fixed period in absolute time, anchored to one epoch for every process."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from oncely.errors import InvalidSchedule
from oncely.recurrence.trigger import SPEC_VERSION, Trigger
from oncely.recurrence.wallclock import Instance

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Every(Trigger):
    """Fires at every whole multiple of ``period`` after 1970-01-01T00:00:00Z.

    The anchor is fixed, not the moment a process started, so every instance of an app computes the
    same instants without talking to the others. Daylight saving does not apply: the period is
    elapsed time (``every(days=1)`` fires at 00:00 UTC). Periods are whole seconds, at least one.
    """

    kind = "every"
    __slots__ = ("period",)

    def __init__(
        self, *, seconds: float = 0, minutes: float = 0, hours: float = 0, days: float = 0
    ) -> None:
        try:
            period = timedelta(seconds=seconds, minutes=minutes, hours=hours, days=days)
        except (TypeError, OverflowError, ValueError) as exc:
            raise InvalidSchedule(
                f"every(seconds={seconds!r}, minutes={minutes!r}, hours={hours!r}, days={days!r})"
                " is not a period",
                hint="give numbers, e.g. every(minutes=5)",
            ) from exc
        if period < timedelta(seconds=1) or period.microseconds:
            raise InvalidSchedule(
                f"every() period {period} is not a whole number of seconds of at least one",
                hint="e.g. every(seconds=30) or every(hours=1)",
            )
        self.period = period

    def __repr__(self) -> str:
        return f"every(seconds={int(self.period.total_seconds())})"

    def _definition(self) -> tuple[Any, ...]:
        return (self.kind, self.period)

    def to_spec(self) -> dict[str, Any]:
        """Return ``{"kind": "every", "v": 1, "seconds": <the period in whole seconds>}``."""
        return {
            "kind": self.kind,
            "v": SPEC_VERSION,
            "seconds": self.period // timedelta(seconds=1),
        }

    def _instances_after(self, t: datetime) -> Iterator[Instance]:
        n = (t - EPOCH) // self.period + 1
        while True:
            at = EPOCH + n * self.period  # past the year 9999 Trigger._bounded ends the series
            wall = at.replace(tzinfo=None)
            yield Instance(at, wall, 0, "UTC", wall)
            n += 1
