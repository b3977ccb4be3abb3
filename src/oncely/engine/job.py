"""A job: a handler declared in code, with how its occurrences are run."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from oncely.errors import ConfigurationError
from oncely.model import Overlap
from oncely.recurrence import Trigger

if TYPE_CHECKING:
    from oncely.engine.run import Run

Delivery = Literal["at_least_once", "at_most_once", "transactional"]
Misfire = Literal["skip", "latest", "all"]

DEFAULT_RETRIES = 5
DEFAULT_GRACE = timedelta(minutes=15)
DEFAULT_LEASE = timedelta(minutes=5)
DEFAULT_MISFIRE_LIMIT = 1000
# An attempt still running after this long fails and frees its handler slot: a handler hung on
# a socket with no timeout otherwise held its slot for good.
DEFAULT_TIMEOUT = timedelta(hours=1)
# Bounds of the job options: past them a count overflows PostgreSQL's integer and a lease
# overflows datetime when added to now.
MAX_LEASE = timedelta(days=7)
MAX_TIMEOUT = timedelta(days=366)
MAX_COUNT = 1_000_000


@dataclass(frozen=True, slots=True, eq=False)
class Job:
    """A code-declared handler and its policies; calling it calls the handler.

    ``trigger`` None means the job is scheduled at run time (`App.schedule`, `App.defer`).
    """

    name: str
    func: Callable[[Run], Any]
    trigger: Trigger | None = None
    retries: int = DEFAULT_RETRIES
    delivery: Delivery = "at_least_once"
    misfire: Misfire = "skip"
    grace: timedelta = DEFAULT_GRACE
    overlap: Overlap = "skip"
    pause_after: int | None = None
    misfire_limit: int = DEFAULT_MISFIRE_LIMIT
    lease: timedelta = DEFAULT_LEASE
    timeout: timedelta | None = DEFAULT_TIMEOUT

    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        _check(self)
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.func))

    def __call__(self, run: Run) -> Any:
        return self.func(run)

    def __repr__(self) -> str:
        return f"<oncely job {self.name!r}>"


def _check(job: Job) -> None:
    """Raise `ConfigurationError` naming the first option oncely cannot use."""

    def fail(what: str, hint: str) -> None:
        raise ConfigurationError(f"job {job.name!r}: {what}; {hint}")

    if not callable(job.func):
        fail(f"{job.func!r} is not callable", "decorate a function that takes one argument, run")
    if job.trigger is not None and not isinstance(job.trigger, Trigger):
        fail(
            f"{job.trigger!r} is not a trigger",
            "pass oncely.cron(...), oncely.every(...), oncely.rrule(...) or oncely.at(...)",
        )
    if isinstance(job.retries, bool) or not isinstance(job.retries, int) or job.retries < 1:
        fail(f"retries={job.retries!r} is not a number of attempts", "use an int >= 1")
    if job.retries > MAX_COUNT:
        fail(
            f"retries={job.retries!r} is more attempts than oncely counts",
            f"use at most {MAX_COUNT}",
        )
    for option, value, kind in (
        ("delivery", job.delivery, Delivery),
        ("misfire", job.misfire, Misfire),
        ("overlap", job.overlap, Overlap),
    ):
        if value not in get_args(kind):
            fail(f"{option}={value!r} is unknown", f"use one of {', '.join(get_args(kind))}")
    if not isinstance(job.grace, timedelta) or job.grace < timedelta(0):
        fail(f"grace={job.grace!r} is not a duration >= 0", "e.g. timedelta(minutes=15)")
    if not isinstance(job.lease, timedelta) or job.lease < timedelta(seconds=1):
        fail(f"lease={job.lease!r} is shorter than a second", "e.g. timedelta(minutes=5)")
    if job.lease > MAX_LEASE:
        # now + lease overflowed datetime on every claim: every tick failed, for every job.
        fail(
            f"lease={job.lease!r} is longer than {MAX_LEASE.days} days",
            "a lease is extended while its handler runs; e.g. timedelta(minutes=5)",
        )
    if job.timeout is not None and (
        not isinstance(job.timeout, timedelta) or job.timeout <= timedelta(0)
    ):
        fail(
            f"timeout={job.timeout!r} is not a duration > 0", "e.g. timedelta(minutes=10), or None"
        )
    if job.timeout is not None and job.timeout > MAX_TIMEOUT:
        fail(f"timeout={job.timeout!r} is over {MAX_TIMEOUT.days} days", "use None for none")
    if job.pause_after is not None and (
        isinstance(job.pause_after, bool)
        or not isinstance(job.pause_after, int)
        or job.pause_after < 1
    ):
        fail(f"pause_after={job.pause_after!r} is not a count", "use an int >= 1, or None")
    if job.pause_after is not None and job.pause_after > MAX_COUNT:
        fail(f"pause_after={job.pause_after!r} is past what is counted", f"use at most {MAX_COUNT}")
    limit = job.misfire_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        fail(f"misfire_limit={limit!r} is not a count", "use an int >= 1")
    if limit > MAX_COUNT:
        fail(f"misfire_limit={limit!r} is past what is counted", f"use at most {MAX_COUNT}")
