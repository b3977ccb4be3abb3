"""What the engine tests share besides fixtures: the clock they move, the app factory's type.

Imported by name from the test modules (``from _engine_support import Clock``); a module named
``conftest`` would be ambiguous, as every test folder has one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import oncely

START = datetime(2026, 11, 30, 8, 59, 30, tzinfo=UTC)


class Clock:
    """The one clock of the apps under test: time moves only when the test says so."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, now: datetime) -> datetime:
        self.now = now
        return now


MakeApp = Callable[[], oncely.App]
