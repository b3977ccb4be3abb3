"""Run one claimed attempt, then book its outcome, by the job's delivery mode (DESIGN lessons 3-4).

Running and booking are two steps so that whoever runs handlers (the tick in this thread, the
worker on its pool) can book outcomes in batches and, while the store is unreachable, keep an
outcome and book it later instead of losing it.
"""

from __future__ import annotations

import copy
import logging
import random
import threading
import traceback
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from oncely.engine.bridge import AsyncBridge
from oncely.engine.job import Job
from oncely.engine.misfire import age
from oncely.engine.retry import backoff
from oncely.engine.run import Run
from oncely.errors import Terminal, TransactionTooLong
from oncely.model import TIMED_OUT, Claim
from oncely.store import Store, Unreadable

log = logging.getLogger("oncely")

Outcome = Literal["succeeded", "retrying", "failed", "lease_lost", "skipped"]
_ERROR_CHARS = 8000
# The executor whose handler the current thread (or an async handler's task) is running: lets a
# stop called from inside a handler see that waiting for handlers would wait for itself.
_calling: ContextVar[Executor | None] = ContextVar("oncely_calling", default=None)


def calling() -> Executor | None:
    """The `Executor` whose handler this code runs in, or None outside every handler."""
    return _calling.get()


@dataclass(frozen=True, slots=True)
class Finished:
    """An attempt that is over and whose outcome is not booked yet.

    ``error`` is None when the handler returned. Otherwise ``final`` says whether the occurrence
    fails now (Terminal, or its last attempt) and ``retry_at`` when it runs again. ``skipped``
    is the reason an occurrence was claimed but not run. ``paused`` is set on what `Executor.book`
    returns: booking this failure paused its schedule (pause_after).
    """

    claim: Claim
    job: Job
    error: str | None = None
    final: bool = False
    retry_at: datetime | None = None
    exc: BaseException | None = None
    skipped: str | None = None
    paused: bool = False


def claim_fields(claim: Claim) -> dict[str, Any]:
    """The structured logging fields of one attempt (see `oncely.worker.logs`)."""
    return {
        "job": claim.job,
        "key": claim.key,
        "scheduled_for": claim.scheduled_for.isoformat(),
        "attempt": claim.attempt,
        "worker": claim.owner,
        "tenant": claim.tenant,
    }


class _LeaseLost(Exception):
    """The booking found the lease taken over; a transactional handler's writes roll back."""


class _HandlerFailed(Exception):
    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class Executor:
    """Calls handlers and books what happened, once per attempt."""

    store: Store
    clock: Callable[[], datetime]
    bridge: AsyncBridge
    rng: random.Random
    # Transactional successes committed since open dashboards were last told (`tell_outcomes`).
    _untold: bool = field(default=False, init=False)
    _untold_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def start(self, claim: Claim, job: Job) -> Run | Finished:
        """The `Run` to call ``job`` with, or a `Finished` failure if ``claim`` must not run.

        A claim reclaimed from a lost worker after its last attempt is not run again: it fails.
        So does one whose stored payload does not read, with the reason, at once.
        """
        if isinstance(claim.payload, Unreadable):
            return Finished(claim, job, f"not run: {claim.payload.reason}", final=True)
        # A serial job's occurrence waits for the previous one to finish: that wait is no
        # misfire (buffer_one's 11:00 was skipped when the 10:00 before it took 80 minutes).
        late = self.clock() - (claim.held_until or claim.scheduled_for)
        if (
            claim.origin == "schedule"
            and claim.attempt == 1
            and job.misfire == "skip"
            and late > job.grace
        ):
            # Materialised in time but claimed only now (every worker of its job was down, or
            # it was materialised ahead of its time): running it now is the replay lesson 8
            # forbids.
            reason = (
                f"misfire: claimed {age(late)} after its time, beyond grace {age(job.grace)} "
                "(misfire='skip')"
            )
            return Finished(claim, job, skipped=reason)
        if claim.reclaimed and claim.attempt > job.retries:
            error = (
                f"the worker running attempt {claim.attempt - 1} was lost (its lease expired) "
                f"and that was the last of {job.retries} attempts"
            )
            return Finished(claim, job, error, final=True)
        if claim.reclaimed:
            log.warning(
                "oncely: %s %s: the worker of attempt %d was lost (lease expired); attempt %d "
                "runs now with the same idempotency key",
                job.name,
                _where(claim),
                claim.attempt - 1,
                claim.attempt,
                extra=claim_fields(claim),
            )
        return Run(claim, self.clock)

    def call(self, run: Run, job: Job) -> Finished | Outcome:
        """Call the handler; return what to book, or the outcome a transactional job booked.

        Handler exceptions are returned, never raised: a worker serves every other job too.
        KeyboardInterrupt and SystemExit pass through: the lease then expires and the occurrence
        is rerun (at_least_once) or abandoned (at_most_once). For a transactional job, a store
        failure at commit raises `StoreError`: the handler's writes rolled back with the booking,
        and the occurrence runs again once its lease expires.
        """
        if job.delivery == "transactional":
            return self._transactional(run, job)
        try:
            self._call(job, run)
        except Exception as exc:
            return self._failed(run.claim, job, exc)
        return Finished(run.claim, job)

    def book(self, pending: list[Finished]) -> list[tuple[Finished, Outcome]]:
        """Book every outcome in ``pending``, removing each from it once booked.

        Successes go in one statement, failures one at a time. When the store fails (StoreError
        is raised), what is still in ``pending`` is exactly what was not booked: book it again.
        """
        booked: list[tuple[Finished, Outcome]] = []
        successes = [f for f in pending if f.error is None and f.skipped is None]
        if successes:
            kept = {
                c.occurrence_id
                for c in self.store.book_success([f.claim for f in successes], self.clock())
            }
            for finished in successes:
                outcome: Outcome = "succeeded"
                if finished.claim.occurrence_id not in kept:
                    outcome = self._lost(finished.claim)
                booked.append((finished, outcome))
            pending[:] = [f for f in pending if f.error is not None or f.skipped is not None]
        while pending:
            finished = pending[0]
            if finished.skipped is not None:
                booked.append((finished, self._book_skipped(finished, finished.skipped)))
            else:
                outcome, paused = self._book_failure(finished)
                booked.append((replace(finished, paused=True) if paused else finished, outcome))
            pending.pop(0)
        return booked

    def _transactional(self, run: Run, job: Job) -> Finished | Outcome:
        claim = run.claim
        try:
            with self.store.transaction() as connection:
                run.connection = connection
                try:
                    self._call(job, run)
                except Exception as exc:
                    raise _HandlerFailed(exc) from exc
                if not self.store.commit_success(run.claim, self.clock(), within=connection):
                    raise _LeaseLost
        except _HandlerFailed as failed:
            return self._failed(claim, job, failed.error)
        except TransactionTooLong as exc:
            # A failed attempt like any other: not "could not commit, runs once its lease
            # expires", which ran it again and again, each time as long.
            return self._failed(claim, job, exc)
        except _LeaseLost:
            return self._lost(claim)
        finally:
            run.connection = None
        with self._untold_lock:
            self._untold = True
        return "succeeded"

    def tell_outcomes(self) -> None:
        """Tell open dashboards once of the transactional successes committed since the last
        call (`Store.tell_outcomes`). Their commits send no notice: a notice in every handler's
        commit serialised those commits on PostgreSQL's notify queue and woke every listening
        worker's backend once per job. Raises `StoreError`; then the next call tells them."""
        with self._untold_lock:
            if not self._untold:
                return
            self._untold = False
        try:
            self.store.tell_outcomes()
        except BaseException:
            with self._untold_lock:
                self._untold = True
            raise

    def _call(self, job: Job, run: Run) -> Any:
        token = _calling.set(self)
        try:
            # The coroutine's task copies this context on the bridge's loop, so it sees it too.
            if job.is_async:
                return self.bridge.run(job.func(run))
            return job.func(run)
        finally:
            _calling.reset(token)

    def timed_out(self, claim: Claim, job: Job) -> Finished:
        """The failure to book for ``claim``'s attempt, still running past ``job.timeout``.

        Retried like any failure, except at_most_once: the attempt may still have its effect.
        """
        assert job.timeout is not None
        error = (
            f"{TIMED_OUT}attempt {claim.attempt} was still running after its job's timeout of "
            f"{age(job.timeout)}; it failed and its handler slot was freed (the handler itself "
            "cannot be stopped: it runs on, and what it returns is not booked)"
        )
        final = job.delivery == "at_most_once" or claim.attempt >= job.retries
        retry_at = None if final else self.clock() + backoff(claim.attempt, self.rng)
        return Finished(claim, job, error, final=final, retry_at=retry_at)

    def _failed(self, claim: Claim, job: Job, exc: Exception) -> Finished:
        error = "".join(traceback.format_exception(exc))[-_ERROR_CHARS:]
        final = isinstance(exc, Terminal) or claim.attempt >= job.retries
        retry_at = None if final else self.clock() + backoff(claim.attempt, self.rng)
        return Finished(claim, job, error, final=final, retry_at=retry_at, exc=exc)

    def _book_skipped(self, finished: Finished, reason: str) -> Outcome:
        claim = finished.claim
        if not self.store.book_skipped(claim, self.clock(), reason):
            return self._lost(claim)
        log.warning(
            "oncely: %s %s not run: %s", claim.job, _where(claim), reason, extra=claim_fields(claim)
        )
        return "skipped"

    def _book_failure(self, finished: Finished) -> tuple[Outcome, bool]:
        """Book one failure; return its outcome and whether booking it paused its schedule."""
        claim, job, exc = finished.claim, finished.job, finished.exc
        assert finished.error is not None
        booked = self.store.book_failure(
            claim,
            self.clock(),
            error=finished.error,
            retry_at=finished.retry_at,
            pause_after=job.pause_after,
        )
        if not booked.booked:
            return self._lost(claim), False
        where, fields = _where(claim), claim_fields(claim)
        if finished.retry_at is not None:
            log.warning(
                "oncely: %s %s: attempt %d of %d failed; retrying at %s",
                job.name,
                where,
                claim.attempt,
                job.retries,
                finished.retry_at.isoformat(),
                exc_info=loggable(exc),
                extra=fields,
            )
            return "retrying", False
        if isinstance(exc, Terminal):
            log.error(
                "oncely: %s %s failed: Terminal, not retried",
                job.name,
                where,
                exc_info=loggable(exc),
                extra=fields,
            )
        elif exc is None:
            log.error("oncely: %s %s failed: %s", job.name, where, finished.error, extra=fields)
        else:
            log.error(
                "oncely: %s %s failed after attempt %d of %d",
                job.name,
                where,
                claim.attempt,
                job.retries,
                exc_info=loggable(exc),
                extra=fields,
            )
        if booked.paused:
            log.error(
                "oncely: schedule %r paused after %d consecutive failed occurrences "
                "(pause_after=%d); app.resume(%r) starts it again",
                claim.key,
                booked.consecutive_failures,
                job.pause_after,
                claim.key,
                extra=fields,
            )
        return "failed", booked.paused_now

    def _lost(self, claim: Claim) -> Outcome:
        log.warning(
            "oncely: %s %s: attempt %d lost its lease to another worker; its completion is "
            "refused and not booked (the other worker's is)",
            claim.job,
            _where(claim),
            claim.attempt,
            extra=claim_fields(claim),
        )
        return "lease_lost"


ExcInfo = tuple[type[BaseException], BaseException, Any]


def loggable(exc: BaseException | None) -> ExcInfo | None:
    """``exc`` for ``exc_info=``, each message of its chain cut to `_ERROR_CHARS` as history
    cuts it: logged whole, a 50 MB message over two attempts wrote 100 MB of log."""
    if exc is None:
        return None
    return (type(exc), _cut(exc, set()), exc.__traceback__)


def _cut(exc: BaseException, seen: set[int]) -> BaseException:
    seen.add(id(exc))
    try:
        text = str(exc)
    except Exception:  # a hostile __str__: logging would print its own error instead
        text = f"<{type(exc).__name__}>"
    clone = exc
    if len(text) > _ERROR_CHARS:
        try:
            clone = copy.copy(exc)
            clone.args = (
                f"{text[:_ERROR_CHARS]} ... [{len(text) - _ERROR_CHARS:,} characters cut]",
            )
        except Exception:
            clone = RuntimeError(f"{type(exc).__name__}: {text[:_ERROR_CHARS]} ... [cut]")
        clone.__traceback__ = exc.__traceback__
        clone.__suppress_context__ = exc.__suppress_context__
    for link in ("__cause__", "__context__"):
        chained = getattr(exc, link)
        if chained is not None and id(chained) not in seen:
            cut = _cut(chained, seen)
            if cut is not chained or clone is not exc:
                if clone is exc:
                    clone = copy.copy(exc)
                    clone.__traceback__ = exc.__traceback__
                    clone.__suppress_context__ = exc.__suppress_context__
                setattr(clone, link, cut)
    return clone


def _where(claim: Claim) -> str:
    tenant = f" tenant {claim.tenant!r}" if claim.tenant is not None else ""
    return f"{claim.key!r}{tenant} at {claim.scheduled_for.isoformat()}"


def extended(claim: Claim, until: datetime) -> Claim:
    return replace(claim, lease_expires_at=until)
