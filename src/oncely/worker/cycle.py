"""One turn of the worker's loop (a *cycle*): book what finished, materialise and claim what is
due (starting ahead of its time by the measured lead), hand claims to the handler pool, and say
how long the loop may sleep."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

from oncely.clock import RESYNC_S
from oncely.engine import Engine, Finished, TickReport, worker_id
from oncely.errors import OncelyError
from oncely.model import WorkerBeat
from oncely.version import oncely_version
from oncely.worker import pacing
from oncely.worker.health import Health
from oncely.worker.housekeeping import Housekeeping
from oncely.worker.leases import heartbeat_at
from oncely.worker.metrics import Metrics
from oncely.worker.outage import Outage
from oncely.worker.pool import HandlerPool, Held, Shared

log = logging.getLogger("oncely")


class Cycle:
    """The loop's state between turns, and one turn. Runs on the loop's thread only."""

    def __init__(
        self,
        *,
        engine: Callable[[], Engine],
        clock: Callable[[], datetime],
        shared: Shared,
        pool: HandlerPool,
        concurrency: int,
        wake_cap: float,
        housekeeping: Housekeeping,
        sync_clock: Callable[[], None],
        poke_heartbeats: Callable[[datetime], None],
        metrics: Metrics,
        health: Health,
        outage: Outage,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._shared = shared
        self._pool = pool
        self.concurrency = concurrency
        self.wake_cap = wake_cap
        self._housekeeping = housekeeping
        self._sync_clock = sync_clock
        self._poke_heartbeats = poke_heartbeats
        self._metrics = metrics
        self._health = health
        self._outage = outage
        #: Since when (monotonic) and in what the current turn is; None between turns.
        self.step: tuple[float, str] | None = None
        self.unbooked: list[Finished] = []
        self._changed = True
        self._due_at: datetime | None = None
        self._prepared_at = float("-inf")
        self._prepare_began: float | None = None  # monotonic; None before the first prepare
        # The first minute's check is the start's: the clock syncs and the code reconciles then.
        self._minutely_at = time.monotonic()
        self._started_at = clock()
        self._beaten_at = float("-inf")  # the first prepare beats: a new worker is listed at once
        self._version = oncely_version()
        self._lead = pacing.Lead()
        self._prefetch = concurrency
        self._ahead_to: datetime | None = None
        self._more_waiting = False

    def changed(self) -> None:
        """Something may have come due sooner: prepare again at the next turn."""
        self._changed = True

    def listening_since(self, since: float) -> bool:
        """The change channel listens from ``since`` (monotonic) on: prepare again at the next
        turn if the last prepare began before it, since it may have missed a change no notice
        announced; return whether it will.

        A prepare begun since reads every change committed before the channel listened, and a
        later one is announced. Preparing again after every first open cost each start of a
        worker a prepare in its first burst's claims.
        """
        began = self._prepare_began
        missed = began is not None and began < since
        if missed:
            self._changed = True
        return missed

    def turn(self, *, draining: bool) -> float:
        """One turn of the loop; returns how many seconds it may sleep."""
        started = time.monotonic()
        # First, before any round trip: what was claimed ahead starts on time.
        self._start_early()
        try:
            self.step = (started, "booking outcomes")
            self._pool.expire()
            booked = self.book()
            if not draining:
                self._serve(booked)
        except OncelyError as exc:
            # The next turn prepares, whatever is due: a failed prepare left its steps half
            # done, and a turn with nothing due made no round trip, so its success ended the
            # outage while the store was still down.
            self._changed = True
            self._health.tick_failed(str(exc))
            self._metrics.tick_failed()
            return self._outage.failed(exc, "tick")
        finally:
            self.step = None
        self._outage.recovered()
        self._health.tick_succeeded()
        self._metrics.tick(time.monotonic() - started)
        return self._delay(draining)

    def _serve(self, booked: int) -> None:
        """Materialise when something came due or changed, then claim and hand out claims.

        Materialising starts ``_lead`` seconds before the next due time (the time the last
        materialise and claim took, measured), writes what comes due by then and claims it
        ahead: at the due time itself the loop only hands the claims to the handlers. Without
        it, a thousand schedules due on the same second ran only once all thousand rows were
        written, a second late; with rows but no claims ready, the last ones started 100 ms
        late, after rounds of claims.
        """
        now, started = self._clock(), time.monotonic()
        early = (
            self._due_at is not None
            and not self._claims_wait_before_due()
            and now >= self._due_at - timedelta(seconds=self._lead.seconds)
        )
        prepare = (
            self._changed
            or self._due_at is None
            or now >= self._due_at
            or (early and self._ahead_to != self._due_at)
            or time.monotonic() - self._prepared_at >= self.wake_cap
        )
        ahead_to = None
        behind = False
        if prepare:
            self._changed = False
            self._prepare_began = time.monotonic()
            # Only the next due time, and only in the lead before it: a plan "ahead" to a time
            # seconds away treated every occurrence until then as missed and skipped all but
            # the newest.
            ahead_to = (
                self._due_at if early and self._due_at is not None and self._due_at > now else None
            )
            self.step = (time.monotonic(), "materialising")
            report = TickReport()
            # Ahead of a due time, the whole of it: the lead is learned from the time it took.
            budget = None if ahead_to is not None else pacing.CATCH_UP_S
            self._engine().prepare(report, ahead_to=ahead_to, budget=budget)
            behind = report.behind
            for job, count in report.abandoned_by_job.items():
                self._metrics.outcome(job, "abandoned", count)
            self._metrics.missed(report)
            self._prepared_at = time.monotonic()
            self._ahead_to = ahead_to
        self.step = (time.monotonic(), "claiming")
        self._pace()
        if prepare or booked or self._more_waiting:
            self._claim(ahead_to)
        if ahead_to is not None:
            # The lead covers writing the rows and claiming them, so both are done by the due
            # time. Measured on these runs only: a prepare at the due time finds the rows
            # written, and learning from it shrank the lead until the next ones came late.
            self._lead.learn(time.monotonic() - started)
        if prepare:
            self.step = (time.monotonic(), "in housekeeping")
            self._metrics.reclaimed(self._housekeeping.maybe_sweep(self._engine(), now))
            self.step = (time.monotonic(), "reconciling")
            self._every_minute()
            self.step = (time.monotonic(), "reading the next due time")
            # Behind: the rest of what is due is written next turn, at once.
            self._due_at = now if behind else self.next_due(now)
        self._start_early()

    def _claims_wait_before_due(self) -> bool:
        """Whether claims taken ahead for a time before ``_due_at`` still wait to start.

        Until they start, the next due time is not prepared ahead: with a lead longer than the
        gap between two due times, its prepare held the loop when these came due, and they
        started only once it was over (with prepares of 0.7 s, every second's occurrences
        started 0.65 s late).
        """
        if self._due_at is None:
            return False
        with self._shared.lock:
            early = self._shared.early
            return bool(early) and early[0].claim.run_after < self._due_at

    def _every_minute(self) -> None:
        """Write this worker's heartbeat row, take a new sample of the database's clock, and say
        this code version is live (and apply its declarations if a newer version's workers are
        gone: a rollback)."""
        if time.monotonic() - self._beaten_at >= RESYNC_S:
            self._beaten_at = time.monotonic()
            self._beat()
        if time.monotonic() - self._minutely_at < RESYNC_S:
            return
        self._minutely_at = time.monotonic()
        self._sync_clock()
        self._engine().reconciler.check()

    def _beat(self) -> None:
        engine = self._engine()
        engine.store.beat(
            WorkerBeat(
                name=worker_id(),
                started_at=self._started_at,
                heartbeat_at=self._clock(),
                oncely_version=self._version,
                code_version=engine.reconciler.fingerprint,
            )
        )

    def next_due(self, now: datetime) -> datetime:
        if self._more_waiting:
            # What is due now is claimed cycle after cycle anyway; counting it as due made every
            # cycle of a burst prepare again (materialise, the wake-up queries): more than a
            # quarter of the loop's time.
            later = self._engine().store.next_due_at(self._engine().jobs, after=now)
            return now + timedelta(seconds=self.wake_cap) if later is None else later
        due = self._engine().store.next_due_at(self._engine().jobs)
        if due is None:
            return now + timedelta(seconds=self.wake_cap)
        if due <= now:
            # Not blind to what comes due later meanwhile: waiting the whole pause out left the
            # next seconds of 2,500 schedules to the other worker alone, 4 seconds in 5.
            later = self._engine().store.next_due_at(self._engine().jobs, after=now)
            pause = now + timedelta(seconds=min(pacing.NOT_OURS_S, self.wake_cap))
            return pause if later is None else min(pause, later)
        return due

    def _delay(self, draining: bool) -> float:
        now = self._clock()
        delays = [self.wake_cap]
        if not draining:
            if self._more_waiting and self._capacity() > 0:
                return 0.0
            if self._due_at is not None:
                no_lead = self._ahead_to == self._due_at or self._claims_wait_before_due()
                lead = 0.0 if no_lead else self._lead.seconds
                delays.append((self._due_at - now).total_seconds() - lead)
            with self._shared.lock:
                first = self._shared.early[0].claim.run_after if self._shared.early else None
            if first is not None:
                delays.append((first - now).total_seconds())
        for coming in (self._pool.next_stall(), self._pool.next_timeout()):
            if coming is not None:
                delays.append(coming)
        return max(min(delays), 0.0)

    def busy(self) -> bool:
        with self._shared.lock:
            busy = bool(self._shared.running or self._shared.finished)
        return busy or bool(self.unbooked)

    # --- claims ------------------------------------------------------------------------------

    def _capacity(self) -> int:
        """Claims to take now: one per handler slot, and ``_prefetch`` more waiting for one."""
        with self._shared.lock:
            held = len(self._shared.ready) + len(self._shared.running) + len(self._shared.early)
        return self.concurrency + self._prefetch - held

    def _claim(self, ahead_to: datetime | None) -> None:
        """Claim what is due now, or by ``ahead_to``: those wait in ``early`` for their time."""
        capacity = self._capacity()
        if capacity <= 0:
            self._more_waiting = True
            return
        claims = self._engine().claim(capacity, due_by=ahead_to)
        for skipped in claims.skipped:
            self._metrics.skipped(skipped.job, skipped.cause)
        self._more_waiting = len(claims) == capacity
        reclaimed = sum(1 for claim in claims if claim.reclaimed)
        if reclaimed:
            self._metrics.reclaimed(reclaimed)
        now = self._clock()
        jobs = self._engine().jobs
        ready = [Held(c, jobs[c.job]) for c in claims if c.run_after <= now]
        early = [Held(c, jobs[c.job]) for c in claims if c.run_after > now]
        with self._shared.lock:
            if early:
                self._shared.early.extend(early)
                self._shared.early.sort(key=lambda h: h.claim.run_after)
            self._shared.ready.extend(ready)
        if claims:
            # A shorter lease than any held may need a beat sooner.
            self._poke_heartbeats(min(heartbeat_at(held) for held in (*ready, *early)))

    def _pace(self) -> None:
        """Size ``_prefetch`` by how fast handlers finish (`pacing.prefetch`); give back what
        waits beyond twice it.

        Until a handler in every slot finishes, the shortest of them so far bounds the duration:
        a slow job is seen as slow while it runs, not only once it is done.
        """
        shared = self._shared
        with shared.lock:
            duration = shared.duration
            if len(shared.running) >= self.concurrency:
                quickest = time.monotonic() - max(shared.started_at.values())
                duration = max(duration or 0.0, quickest)
            waiting = len(shared.ready)
        self._prefetch = pacing.prefetch(self.concurrency, duration)
        if waiting > 2 * self._prefetch:
            # Down to twice the prefetch, not to it: handler durations wobble on a loaded
            # machine, and each wobble gave back hundreds of claims to take again a moment
            # later, three claims and releases per occurrence run in a burst.
            self._give_back(waiting - 2 * self._prefetch)

    def _give_back(self, count: int) -> None:
        """Release the ``count`` claims last in the queue, for any worker to take."""
        with self._shared.lock:
            spare = [self._shared.ready.pop() for _ in range(min(count, len(self._shared.ready)))]
        if not spare:
            return
        try:
            released = self._engine().store.release([held.claim for held in spare], self._clock())
        except OncelyError:
            # Not given back: still ours, to run, not to lose until their leases expire.
            with self._shared.lock:
                self._shared.ready.extend(reversed(spare))
            raise
        self._metrics.outcome("*", "released", released)
        log.debug("oncely: gave back %d claimed occurrence(s) for other workers", released)

    def _start_early(self) -> None:
        """Hand the claims whose time has come to the handlers, and wake handler threads."""
        shared = self._shared
        with shared.lock:
            if shared.early:
                now = self._clock()
                due = 0
                while due < len(shared.early) and shared.early[due].claim.run_after <= now:
                    due += 1
                shared.ready.extend(shared.early[:due])
                del shared.early[:due]
        self._pool.dispatch()

    def book(self) -> int:
        """Book finished attempts; keep what the store did not take, to book next cycle."""
        with self._shared.lock:
            self.unbooked.extend(self._shared.finished)
            self._shared.finished.clear()
        executor = self._engine().executor
        executor.tell_outcomes()
        if not self.unbooked:
            return 0
        booked = executor.book(self.unbooked)
        if any(outcome == "retrying" for _, outcome in booked):
            self._changed = True  # its retry may come due before the next due time computed
        # Counted once per job and outcome, not once per occurrence: in a burst, a metric
        # update per occurrence was a tenth of the loop's time.
        counts = Counter((finished.job.name, outcome) for finished, outcome in booked)
        for (job, outcome), n in counts.items():
            self._metrics.outcome(job, outcome, n)
        missed = TickReport()
        missed.booked(booked)
        self._metrics.missed(missed)
        return len(booked)
