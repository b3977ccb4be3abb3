"""Every error oncely raises: one root, `OncelyError`, and subclasses that carry data.

A class's docstring is its default message. Driver errors are translated where they happen
(the store, the lock providers) with `raise ... from exc`; nothing else escapes the public API.
"""

from __future__ import annotations


class OncelyError(Exception):
    """oncely could not do what was asked."""

    #: The index of the item of a bulk call (`App.defer_many`, `App.schedule_many`) that is
    #: wrong; None for an error about the call as a whole.
    item: int | None = None

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or _default_message(type(self)))


def _default_message(cls: type[OncelyError]) -> str:
    """The class docstring on one line (a wrapped docstring would put its indent in messages)."""
    return " ".join((cls.__doc__ or cls.__name__).split())


class InvalidSchedule(OncelyError, ValueError):
    """The schedule is not valid."""

    rule: str
    reason: str

    def __init__(self, reason: str | None = None, *, rule: str = "", hint: str = "") -> None:
        reason = reason or _default_message(type(self))
        self.rule = rule
        self.reason = reason
        self.hint = hint
        message = f"{rule!r}: {reason}" if rule else reason
        if hint:
            message = f"{message} ({hint})"
        super().__init__(message)


class Terminal(OncelyError):
    """The job failed in a way that must not be retried."""


class LockHeld(OncelyError):
    """The lock is held by another owner."""

    def __init__(self, message: str | None = None, *, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class LockUnavailable(OncelyError):
    """The lock's provider cannot be reached, so nobody can tell who holds the lock: what it
    guards does not run (fail closed)."""


class StoreError(OncelyError):
    """The store refused the operation; nothing of it was written."""


class StoreUnavailable(StoreError):
    """The store cannot be reached."""


class TransactionTooLong(StoreError):
    """A transaction held the SQLite database's one write lock too long and was rolled back."""


class UnknownSchedule(OncelyError, LookupError):
    """No schedule has that key."""


class ConfigurationError(OncelyError):
    """oncely is configured in a way it cannot use."""


class InvalidPayload(OncelyError, TypeError):
    """The payload cannot be stored: it must be JSON (dicts, lists, strings, numbers, booleans,
    None), with no NaN or infinity."""


class UnknownJob(OncelyError, LookupError):
    """No job has that name in this app."""


class NaiveDatetime(InvalidSchedule):
    """A datetime without a time zone was given; oncely needs aware datetimes."""


class TenantMismatch(OncelyError, ValueError):
    """The tenant given differs from the tenant this view is bound to."""


class TickFailed(OncelyError):
    """A tick stopped at a failing step; the steps after it did not run."""

    step: str | None

    def __init__(self, message: str | None = None, *, step: str | None = None) -> None:
        self.step = step
        super().__init__(message)
