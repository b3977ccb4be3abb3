"""Run one claimed attempt and book its outcome, by the job's delivery mode (DESIGN lessons 3-4)."""

from __future__ import annotations

import logging
import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from oncely.engine.bridge import AsyncBridge
from oncely.engine.job import Job
from oncely.engine.retry import backoff
from oncely.engine.run import Run
from oncely.errors import Terminal
from oncely.model import Claim
from oncely.store import Store

log = logging.getLogger("oncely")

Outcome = Literal["ran", "succeeded", "retrying", "failed", "lease_lost"]
_ERROR_CHARS = 8000


class _LeaseLost(Exception):
    """The booking found the lease taken over; a transactional handler's writes roll back."""


@dataclass
class Executor:
    """Calls handlers and books what happened, once per attempt."""

    store: Store
    clock: Callable[[], datetime]
    bridge: AsyncBridge
    rng: random.Random

    def execute(self, claim: Claim, job: Job) -> Outcome:
        """Run ``claim`` with ``job``'s handler; return how the attempt was booked.

        ``"ran"``: the handler returned and the success is for the caller to book, with others,
        through `book_successes` (one statement for a batch). Handler exceptions are booked here,
        never raised: the tick serves every other job too.
        KeyboardInterrupt and SystemExit pass through: the lease then expires and the occurrence
        is rerun (at_least_once) or abandoned (at_most_once).
        """
        if claim.reclaimed and claim.attempt > job.retries:
            error = (
                f"the worker running attempt {claim.attempt - 1} was lost (its lease expired) "
                f"and that was the last of {job.retries} attempts"
            )
            return self._fail(claim, job, error, final=True)
        if claim.reclaimed:
            log.warning(
                "oncely: %s %s: the worker of attempt %d was lost (lease expired); attempt %d "
                "runs now with the same idempotency key",
                job.name,
                _where(claim),
                claim.attempt - 1,
                claim.attempt,
            )
        if job.delivery == "transactional":
            return self._transactional(claim, job)
        run = Run(claim, self.clock)
        try:
            self._call(job, run)
        except Exception as exc:
            return self._failed(claim, job, exc)
        return "ran"

    def book_successes(self, claims: list[Claim]) -> int:
        """Book ``claims`` (each one "ran") as succeeded; return how many were booked."""
        booked = self.store.book_success(claims, self.clock())
        if len(booked) < len(claims):
            kept = {c.occurrence_id for c in booked}
            for claim in claims:
                if claim.occurrence_id not in kept:
                    self._lost(claim, claim.job)
        return len(booked)

    def _transactional(self, claim: Claim, job: Job) -> Outcome:
        try:
            with self.store.transaction() as connection:
                run = Run(claim, self.clock, connection)
                try:
                    self._call(job, run)
                except Exception as exc:
                    raise _HandlerFailed(exc) from exc
                if not self.store.book_success([claim], self.clock(), within=connection):
                    raise _LeaseLost
        except _HandlerFailed as failed:
            return self._failed(claim, job, failed.error)
        except _LeaseLost:
            return self._lost(claim, job.name)
        return "succeeded"

    def _call(self, job: Job, run: Run) -> Any:
        if job.is_async:
            return self.bridge.run(job.func(run))
        return job.func(run)

    def _failed(self, claim: Claim, job: Job, exc: Exception) -> Outcome:
        error = "".join(traceback.format_exception(exc))[-_ERROR_CHARS:]
        final = isinstance(exc, Terminal) or claim.attempt >= job.retries
        return self._fail(claim, job, error, final=final, exc=exc)

    def _fail(
        self, claim: Claim, job: Job, error: str, *, final: bool, exc: Exception | None = None
    ) -> Outcome:
        now = self.clock()
        retry_at = None if final else now + backoff(claim.attempt, self.rng)
        booked = self.store.book_failure(
            claim, now, error=error, retry_at=retry_at, pause_after=job.pause_after
        )
        if not booked.booked:
            return self._lost(claim, job.name)
        where = _where(claim)
        if retry_at is not None:
            log.warning(
                "oncely: %s %s: attempt %d of %d failed; retrying at %s",
                job.name,
                where,
                claim.attempt,
                job.retries,
                retry_at.isoformat(),
                exc_info=exc,
            )
            return "retrying"
        if isinstance(exc, Terminal):
            log.error("oncely: %s %s failed: Terminal, not retried", job.name, where, exc_info=exc)
        else:
            log.error(
                "oncely: %s %s failed after attempt %d of %d",
                job.name,
                where,
                claim.attempt,
                job.retries,
                exc_info=exc,
            )
        if booked.paused:
            log.error(
                "oncely: schedule %r paused after %d consecutive failed occurrences "
                "(pause_after=%d); app.resume(%r) starts it again",
                claim.key,
                booked.consecutive_failures,
                job.pause_after,
                claim.key,
            )
        return "failed"

    def _lost(self, claim: Claim, job: str) -> Outcome:
        log.warning(
            "oncely: %s %s: attempt %d lost its lease to another worker; its outcome is not "
            "booked (the other worker's is)",
            job,
            _where(claim),
            claim.attempt,
        )
        return "lease_lost"


class _HandlerFailed(Exception):
    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _where(claim: Claim) -> str:
    tenant = f" tenant {claim.tenant!r}" if claim.tenant is not None else ""
    return f"{claim.key!r}{tenant} at {claim.scheduled_for.isoformat()}"


def extended(claim: Claim, until: datetime) -> Claim:
    return replace(claim, lease_expires_at=until)
