"""oncely: every scheduled job once per occurrence, however many copies of your app are running."""

from __future__ import annotations

from oncely.errors import (
    InvalidSchedule,
    LockHeld,
    OncelyError,
    StoreUnavailable,
    Terminal,
    UnknownSchedule,
)
from oncely.recurrence import (
    at,
    cron,
    every,
    parse_cron,
    parse_rrule,
    rrule,
    validate_cron,
    validate_rrule,
)

__all__ = [
    "InvalidSchedule",
    "LockHeld",
    "OncelyError",
    "StoreUnavailable",
    "Terminal",
    "UnknownSchedule",
    "at",
    "cron",
    "every",
    "parse_cron",
    "parse_rrule",
    "rrule",
    "validate_cron",
    "validate_rrule",
]
