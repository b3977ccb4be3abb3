"""The handler pool: threads that run claimed attempts, as many as keep up, up to concurrency.

The loop puts claims in ``ready`` and calls `HandlerPool.dispatch`; a handler thread takes one,
runs it through the engine's executor and leaves what finished in ``finished`` for the loop to
book. Threads stay, waiting for work, until the worker stops.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from oncely.engine import Engine, Finished, Job, Run, age, claim_fields
from oncely.errors import StoreError
from oncely.model import Claim
from oncely.worker.metrics import Metrics

log = logging.getLogger("oncely")

# Weight of the newest handler duration in the running average.
_DURATION_WEIGHT = 0.2
# Handler threads kept busy: enough to get through the waiting claims in about _SHARE_S each,
# at least one, at most the concurrency. Every thread woken for a burst of quick handlers made
# them take the GIL from each other and from the loop: a burst drained at three quarters of
# the speed of one thread. One handler running longer than _STALL_S, while claims wait, no
# longer counts as a thread keeping up: another is woken, so a slow one never holds quick ones.
_SHARE_S = 0.02
_STALL_S = 0.02


@dataclass(eq=False)
class Held:
    """A claim this process holds: waiting for a handler slot (run is None) or running."""

    claim: Claim
    job: Job
    run: Run | None = None


@dataclass
class Shared:
    """What handler threads, heartbeats and the loop share, under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    # Notified when claims are added to ``ready``, and when the worker stops.
    work: threading.Condition = field(init=False)
    ready: deque[Held] = field(default_factory=deque)
    # Claims taken just ahead of their time, by run_after; started by the loop when it comes.
    early: list[Held] = field(default_factory=list)
    running: dict[int, Held] = field(default_factory=dict)
    started_at: dict[int, float] = field(default_factory=dict)
    # Attempts failed at their job's timeout whose handlers have not returned yet: each still
    # holds a thread, but no longer a slot.
    expired: dict[int, Held] = field(default_factory=dict)
    finished: list[Finished] = field(default_factory=list)
    threads: int = 0
    # Threads waiting on ``work`` for claims.
    idle: int = 0
    # Running average of how long one handler takes, in seconds (None: none finished yet).
    duration: float | None = None

    def __post_init__(self) -> None:
        self.work = threading.Condition(self.lock)

    @property
    def awake(self) -> int:
        """Handler threads not waiting for claims: running one, or about to take one."""
        return self.threads - self.idle

    def held(self) -> list[Held]:
        """Every claim held: running, waiting for a thread, or waiting for its time."""
        with self.lock:
            return [*self.running.values(), *self.ready, *self.early]

    def forget(self, held: Held) -> bool:
        """Stop holding ``held`` unless it runs; return whether it was held at all."""
        with self.lock:
            if held in self.early:
                self.early.remove(held)
                return True
            if held in self.ready:
                self.ready.remove(held)
                return True
            return self.running.get(held.claim.occurrence_id) is held


class HandlerPool:
    """Runs the claims in ``shared.ready`` on up to ``concurrency`` threads."""

    def __init__(
        self,
        shared: Shared,
        *,
        concurrency: int,
        engine: Callable[[], Engine],
        clock: Callable[[], datetime],
        metrics: Metrics,
        wake_loop: Callable[[], None],
    ) -> None:
        self.shared = shared
        self.concurrency = concurrency
        self._engine = engine
        self._clock = clock
        self._metrics = metrics
        self._wake_loop = wake_loop
        self._stopped = False

    def stop(self) -> None:
        """Let idle threads end (running handlers end theirs when they return)."""
        with self.shared.work:
            self._stopped = True
            self.shared.work.notify_all()

    def dispatch(self) -> None:
        """Wake idle handler threads for the waiting claims; start more, up to concurrency."""
        shared = self.shared
        with shared.work:
            if not shared.ready:
                return
            wake = max(self._threads_wanted() - self._keeping_up(), 0)
            shared.work.notify(wake)
            start = max(min(wake - shared.idle, self.concurrency - shared.threads), 0)
            shared.threads += start
        # Threads stay, waiting for work, until the worker stops: starting them again for each
        # batch of claims made the loop wait for each to be scheduled, a seventh of a burst's
        # loop time. Daemon threads: a handler still running after the drain timeout must not
        # keep the process from exiting (a pool's threads are joined at interpreter exit).
        for _ in range(start):
            threading.Thread(target=self._handle, name="oncely-handler", daemon=True).start()

    def next_stall(self) -> float | None:
        """Seconds until the next running handler counts as stalled while claims wait for a
        thread (those stalled already were counted by the dispatch that followed)."""
        with self.shared.lock:
            if not self.shared.ready or self.shared.awake >= self.concurrency:
                return None
            return self._until_a_stall()

    def _until_a_stall(self) -> float | None:
        """Seconds until the next running handler counts as stalled (``shared.lock`` held);
        None when none is yet to."""
        now = time.monotonic()
        coming = [b + _STALL_S - now for b in self.shared.started_at.values() if b + _STALL_S > now]
        return min(coming, default=None)

    def _keeping_up(self) -> int:
        """Handler threads awake and not stalled (``shared.lock`` held)."""
        shared, now = self.shared, time.monotonic()
        stalled = sum(1 for began in shared.started_at.values() if now - began > _STALL_S)
        return shared.awake - stalled

    def _threads_wanted(self) -> int:
        """Handler threads to keep busy for the waiting claims (``shared.lock`` held)."""
        shared = self.shared
        if shared.duration is None:  # nothing finished yet: one thread per claim
            wanted = len(shared.ready)
        else:
            wanted = math.ceil(len(shared.ready) * shared.duration / _SHARE_S)
        return min(max(wanted, 1), self.concurrency)

    def expire(self) -> None:
        """Fail the attempts running past their job's timeout, and free their slots.

        The handler cannot be stopped (Python has no way to kill a thread): it runs on, told
        through ``run.lease_lost``, and what it returns is not booked. Its thread no longer
        counts: another is started for the claims waiting.
        """
        shared, now = self.shared, time.monotonic()
        late: list[tuple[Held, float]] = []
        with shared.lock:
            for key, held in list(shared.running.items()):
                timeout = held.job.timeout
                began = shared.started_at[key]
                if timeout is None or now - began < timeout.total_seconds():
                    continue
                del shared.running[key]
                del shared.started_at[key]
                shared.expired[key] = held
                shared.threads -= 1
                late.append((held, now - began))
        if not late:
            return
        executor = self._engine().executor
        failed = []
        for held, ran in late:
            claim = held.claim
            if held.run is not None:
                held.run.mark_lease_lost()
            log.error(
                "oncely: %s %r at %s: attempt %d ran past its timeout of %s (%.0f s); it fails "
                "and its slot is freed (its handler thread runs on: Python cannot stop it)",
                held.job.name,
                claim.key,
                claim.scheduled_for.isoformat(),
                claim.attempt,
                age(held.job.timeout) if held.job.timeout is not None else "none",
                ran,
                extra=claim_fields(claim),
            )
            failed.append(executor.timed_out(claim, held.job))
        with shared.lock:
            shared.finished.extend(failed)
        for held, _ in late:
            self._metrics.outcome(held.job.name, "timed_out")

    def stuck(self) -> int:
        """Handlers still running past their job's timeout."""
        with self.shared.lock:
            return len(self.shared.expired)

    def next_timeout(self) -> float | None:
        """Seconds until the next running handler reaches its job's timeout."""
        shared, now = self.shared, time.monotonic()
        with shared.lock:
            coming = [
                shared.started_at[key] + held.job.timeout.total_seconds() - now
                for key, held in shared.running.items()
                if held.job.timeout is not None
            ]
        return min(coming, default=None)

    def _handle(self) -> None:
        """A handler thread: run waiting claims one after another, and wait for more."""
        shared = self.shared
        counted = True  # in shared.threads; not once its attempt timed out
        try:
            while True:
                with shared.work:
                    while not self._stopped and (
                        not shared.ready or self._keeping_up() > self._threads_wanted()
                    ):
                        shared.idle += 1
                        # Claims left waiting for a running handler to stall: this thread takes
                        # one at that stall itself. The loop may be asleep past it, counting
                        # this thread busy (three of twelve claims waited its whole sleep).
                        # Waking the loop here instead, every idle thread each time it waited,
                        # put the lag benchmark's p99 at 42 ms against 28 without it.
                        # With none yet to stall, a claim taken meanwhile may start the count.
                        shared.work.wait(
                            (self._until_a_stall() or _STALL_S) if shared.ready else None
                        )
                        shared.idle -= 1
                    if self._stopped:
                        break
                    held = shared.ready.popleft()
                    began = time.monotonic()
                    key = held.claim.occurrence_id
                    shared.running[key] = held
                    shared.started_at[key] = began
                finished = None
                try:
                    finished = self.run_one(held)
                finally:
                    took = time.monotonic() - began
                    with shared.lock:
                        if shared.expired.pop(key, None) is not None:
                            counted = False
                        else:
                            del shared.running[key]
                            del shared.started_at[key]
                            shared.duration = (
                                took
                                if shared.duration is None
                                else shared.duration + _DURATION_WEIGHT * (took - shared.duration)
                            )
                            if finished is not None:
                                shared.finished.append(finished)
                if not counted:
                    log.warning(
                        "oncely: %s %r: the handler that ran past its timeout returned after "
                        "%.0f s; what it returned is not booked",
                        held.job.name,
                        held.claim.key,
                        took,
                        extra=claim_fields(held.claim),
                    )
                    return
                self._wake_loop()
        except BaseException:
            log.exception("oncely: a handler thread failed; its claims are left to expire")
            raise
        finally:
            if counted:
                with shared.lock:
                    shared.threads -= 1
            self._wake_loop()

    def run_one(self, held: Held) -> Finished | None:
        """Run ``held``'s attempt; return what is left to book (None: nothing, or booked)."""
        engine = self._engine()
        executor, job = engine.executor, held.job
        now = self._clock()
        if now >= held.claim.lease_expires_at:
            # A claim that waited for a slot past its lease (the loop too starved to extend it)
            # may already run on another worker: starting it too ran an at_least_once
            # occurrence twice on a loaded machine with no worker killed. It is given back
            # unless taken over: left to expire, an at_most_once one read "abandoned" though it
            # never ran.
            log.warning(
                "oncely: %s %r at %s: its lease ran out while it waited for a handler slot "
                "(this worker is overloaded); not started here, given back for any worker",
                job.name,
                held.claim.key,
                held.claim.scheduled_for.isoformat(),
                extra=claim_fields(held.claim),
            )
            try:
                engine.store.release([held.claim], self._clock())
            except StoreError:
                log.warning("oncely: the store refused it back; its lease runs out on its own")
            return None
        started = executor.start(held.claim, job)
        if isinstance(started, Finished):
            return started
        with self.shared.lock:
            held.run = started
            started.claim = held.claim  # a heartbeat may have extended it meanwhile
        claim = held.claim
        if claim.attempt == 1:
            self._metrics.lag(job.name, (now - claim.scheduled_for).total_seconds())
        try:
            result = executor.call(started, job)
        except StoreError as exc:
            log.warning(
                "oncely: %s %r: the transaction of attempt %d could not commit (%s); its "
                "writes rolled back and it runs again once its lease expires",
                job.name,
                claim.key,
                claim.attempt,
                exc,
                extra=claim_fields(claim),
            )
            self._metrics.outcome(job.name, "unbooked")
            return None
        if isinstance(result, Finished):
            return result
        self._metrics.outcome(job.name, result)
        return None
