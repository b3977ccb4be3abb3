"""oncely: every scheduled job once per occurrence, however many copies of your app are running.

The errors are imported with the package; the other names on first use (PEP 562), so that
``oncely lint`` and ``oncely.errors`` load without the engine, the stores and their drivers.
"""

from __future__ import annotations

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
    TransactionTooLong,
    UnknownJob,
    UnknownSchedule,
)

# Not typing's: importing typing would be a tenth of a warm `oncely lint` (oncely.lint.manifest).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from oncely import locks, testing
    from oncely.app import App, TenantView
    from oncely.engine import Explanation, Job, Run, TickReport
    from oncely.model import Attempt, Occurrence, Schedule
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
    "Attempt",
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
    "TransactionTooLong",
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

# Where each public name is defined; a name whose home is oncely.<name> is that submodule.
_HOMES = {
    "locks": "oncely.locks",
    "testing": "oncely.testing",
    **dict.fromkeys(["App", "TenantView"], "oncely.app"),
    **dict.fromkeys(["Explanation", "Job", "Run", "TickReport"], "oncely.engine"),
    **dict.fromkeys(["Attempt", "Occurrence", "Schedule"], "oncely.model"),
    **dict.fromkeys(
        [
            "at",
            "cron",
            "every",
            "parse_cron",
            "parse_rrule",
            "rrule",
            "validate_cron",
            "validate_rrule",
        ],
        "oncely.recurrence",
    ),
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module = importlib.import_module(home)
    value = module if home == f"{__name__}.{name}" else getattr(module, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
