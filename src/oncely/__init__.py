"""oncely: every scheduled job once per occurrence, however many copies of your app are running."""

from __future__ import annotations

from oncely import locks, testing
from oncely.app import App, TenantView
from oncely.engine import Explanation, Job, Run, TickReport
from oncely.errors import (
    ConfigurationError,
    InvalidPayload,
    InvalidSchedule,
    LockHeld,
    LockUnavailable,
    NaiveDatetime,
    OncelyError,
    StoreError,
    StoreUnavailable,
    TenantMismatch,
    Terminal,
    TickFailed,
    UnknownJob,
    UnknownSchedule,
)
from oncely.model import Occurrence, Schedule
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
    "App",
    "ConfigurationError",
    "Explanation",
    "InvalidPayload",
    "InvalidSchedule",
    "Job",
    "LockHeld",
    "LockUnavailable",
    "NaiveDatetime",
    "Occurrence",
    "OncelyError",
    "Run",
    "Schedule",
    "StoreError",
    "StoreUnavailable",
    "TenantMismatch",
    "TenantView",
    "Terminal",
    "TickFailed",
    "TickReport",
    "UnknownJob",
    "UnknownSchedule",
    "at",
    "cron",
    "every",
    "locks",
    "parse_cron",
    "parse_rrule",
    "rrule",
    "testing",
    "validate_cron",
    "validate_rrule",
]
