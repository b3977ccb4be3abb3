"""Housekeeping: the worker's own upkeep, one worker at a time (DESIGN lesson 12).

Not a scheduled job and not a timer loop: every worker's loop asks `maybe_sweep` when it wakes
anyway, and whichever worker takes the housekeeping lock (an `app.lock` like any other: one
lease implementation) sweeps. The lock is kept ``every`` after it was taken, so the whole fleet
sweeps once per ``every``, however many workers run.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from oncely.arguments import Retention
from oncely.engine import Engine, age, worker_id
from oncely.errors import LockHeld
from oncely.locks import RESERVED_LOCK_PREFIX, Lock
from oncely.model import Sweep

log = logging.getLogger("oncely")

LEASE_NAME = f"{RESERVED_LOCK_PREFIX}housekeeping"
_PRUNE_BATCH = 1000
# One sweep deletes at most this many batches; the rest waits for the next sweep, so a first
# sweep over years of history does not hold the worker's loop for minutes.
_PRUNE_BATCHES = 50
# A worker that declares a job reclaims its lost attempts within a sweep or a claim; one whose
# lease ran out this long ago belongs to a job no running worker declares.
ORPHANED_AFTER = timedelta(hours=1)
# A worker's row whose heartbeat is this old is deleted: the worker was killed without stopping.
SILENT_WORKER_AFTER = timedelta(hours=1)


class Housekeeping:
    """Prunes history older than ``retention``, reclaims expired leases and forgets the rows of
    workers silent for `SILENT_WORKER_AFTER`."""

    def __init__(self, lock: Lock, *, retention: Retention, every: timedelta) -> None:
        """``lock`` is the app's lock named `LEASE_NAME`, held ``every`` at least."""
        self.lock = lock
        self.retention = retention
        self.every = every
        self._next_at: datetime | None = None

    def maybe_sweep(self, engine: Engine, now: datetime) -> int:
        """Sweep if it is time and this worker gets the lease; return leases reclaimed."""
        if self._next_at is not None and now < self._next_at:
            return 0
        self._next_at = now + self.every
        try:
            self.lock.acquire()
        except LockHeld:
            return 0
        try:
            return self._sweep(engine, now)
        finally:
            self.lock.release()

    def _sweep(self, engine: Engine, now: datetime) -> int:
        store = engine.store
        budgets = {
            name: job.retries for name, job in engine.jobs.items() if job.delivery != "at_most_once"
        }
        reclaimed = store.reclaim_expired(now, budgets)
        for lost in reclaimed:
            log.warning(
                "oncely: housekeeping: %r at %s: worker %s was lost during attempt %d (lease "
                "expired); now %s",
                lost.key,
                lost.scheduled_for.isoformat(),
                lost.owner,
                lost.attempts,
                lost.status,
            )
        orphaned = store.fail_orphaned(now, list(engine.jobs), now - ORPHANED_AFTER)
        for orphan in orphaned:
            log.error(
                "oncely: housekeeping: %r at %s failed: its worker was lost during attempt %d "
                "and no running worker declares job %r, so nothing reclaimed it",
                orphan.key,
                orphan.scheduled_for.isoformat(),
                orphan.attempts,
                orphan.job,
            )
        store.forget_silent_workers(now - SILENT_WORKER_AFTER)
        store.prepare_history(now)
        pruned = 0
        before, by_status = self.retention.cuts(now)
        for _ in range(_PRUNE_BATCHES):
            batch = store.prune(before, _PRUNE_BATCH, by_status=by_status)
            pruned += batch
            if batch < _PRUNE_BATCH:
                break
        sweep = Sweep(
            worker=worker_id(),
            started_at=now,
            finished_at=engine.clock(),
            pruned=pruned,
            reclaimed=len(reclaimed) + len(orphaned),
            abandoned=0,
            error=None,
        )
        store.record_sweep(sweep)
        log.info(
            "oncely: housekeeping by %s: pruned %d occurrence(s) older than %s, reclaimed %d "
            "expired lease(s)",
            sweep.worker,
            pruned,
            _kept(self.retention),
            len(reclaimed),
        )
        return len(reclaimed) + len(orphaned)


def _kept(retention: Retention) -> str:
    """``retention`` as a log line says it: ``30d``, ``30d (failed 90d)``."""
    others = ", ".join(f"{s} {age(kept)}" for s, kept in sorted(retention.by_status.items()))
    return age(retention.default) + (f" ({others})" if others else "")
