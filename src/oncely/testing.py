"""Helpers for testing code that uses oncely: a clock that moves only when the test says so.

clock = oncely.testing.Clock(datetime(2026, 3, 29, 0, 59, tzinfo=UTC))
app = oncely.App("sqlite:///test.db", clock=clock)
clock.advance(minutes=2)
app.tick()          # runs what came due in those two minutes, without sleeping
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from oncely.errors import NaiveDatetime

__all__ = ["Clock"]


class Clock:
    """A frozen, advanceable clock for ``App(clock=...)``: aware UTC, moved only by the test."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = _aware(now) if now is not None else datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta | None = None, /, **parts: float) -> datetime:
        """Move forward by ``delta`` or by timedelta keyword parts (``minutes=5``); returns the
        new time."""
        self.now += (delta or timedelta()) + timedelta(**parts)
        return self.now

    def set(self, now: datetime) -> datetime:
        """Jump to ``now`` (backwards too: to test what a clock set back does)."""
        self.now = _aware(now)
        return self.now

    def __repr__(self) -> str:
        return f"<oncely.testing.Clock {self.now.isoformat()}>"


def _aware(when: datetime) -> datetime:
    if not isinstance(when, datetime) or when.utcoffset() is None:
        raise NaiveDatetime(f"Clock({when!r}): give an aware datetime, e.g. with tzinfo=UTC")
    return when.astimezone(UTC)
