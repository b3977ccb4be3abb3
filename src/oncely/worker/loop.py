"""The worker: the one loop in oncely that waits on time (DESIGN lessons 2, 10, 12).

Each turn of the loop (a *cycle*) books what handlers finished, extends the leases of what is
still running, materialises and claims what is due, hands claims to the handler pool, and then
sleeps until the next thing that needs it: the next due time (one indexed query), a heartbeat,
a handler finishing, a ``NOTIFY`` from another process (PostgreSQL), a signal, or at the latest
``wake_cap`` seconds, so a change no notification announced is still seen.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import select
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import FrameType
from typing import TYPE_CHECKING

from oncely.clock import RESYNC_S
from oncely.engine import Engine, Job, Run, TickReport, worker_id
from oncely.engine.execute import Finished, claim_fields, extended
from oncely.errors import ConfigurationError, OncelyError, StoreError
from oncely.locks import Lock, StoreProvider
from oncely.model import Claim
from oncely.store import Store, Watch
from oncely.worker.health import Health
from oncely.worker.housekeeping import LEASE_NAME as HOUSEKEEPING_LOCK
from oncely.worker.housekeeping import Housekeeping
from oncely.worker.metrics import Metrics
from oncely.worker.outage import Outage
from oncely.worker.server import HttpServer, parse_address

if TYPE_CHECKING:
    from oncely.app import App

log = logging.getLogger("oncely")

DEFAULT_CONCURRENCY = 8
DEFAULT_DRAIN_TIMEOUT_S = 30.0
DEFAULT_WAKE_CAP_S = 30.0
# Something due that this worker cannot claim yet (an occurrence buffered behind one another
# worker runs) would otherwise wake the loop again at once, forever.
_NOT_OURS_S = 5.0
# Materialising starts this many times as long before a due time as the last one took,
# within these bounds: rows written ahead are at most _LEAD_MAX early (a claim too late for its
# misfire policy skips them; see Executor.start).
_LEAD_FACTOR = 1.5
_LEAD_MIN = 0.02
_LEAD_MAX = 2.0
# A shorter prepare shrinks the lead by at most this factor: a quick one (the other worker had
# written the rows, or none could be claimed) cut it to 20 ms, and when this worker next wrote
# all of a second's 2,500 rows itself, they started half a second late.
_LEAD_DECAY = 0.9
# Claims waiting for a handler slot: about what the handlers get through in _HORIZON_S, at
# least one per slot, at most _PREFETCH_MAX. More than twice that are given back for other
# workers: a process that had claimed a burst of quick occurrences sat on the slow ones that
# followed while an idle worker next to it had nothing to do.
_HORIZON_S = 1.0
_PREFETCH_MAX = 1024
# Weight of the newest handler duration in the running average.
_DURATION_WEIGHT = 0.2
# Handler threads kept busy: enough to get through the waiting claims in about _SHARE_S each,
# at least one, at most the concurrency. Every thread woken for a burst of quick handlers made
# them take the GIL from each other and from the loop: a burst drained at three quarters of
# the speed of one thread. One handler running longer than _STALL_S, while claims wait, no
# longer counts as a thread keeping up: another is woken, so a slow one never holds quick ones.
_SHARE_S = 0.02
_STALL_S = 0.02
# Store users besides the handlers: the loop (claims, bookings, heartbeats) and housekeeping.
_OWN_CONNECTIONS = 2


@dataclass(eq=False)
class _Held:
    """A claim this process holds: waiting for a handler slot (run is None) or running."""

    claim: Claim
    job: Job
    run: Run | None = None


@dataclass
class _Shared:
    """What handler threads and the loop share, under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    # Notified when claims are added to ``ready``, and when the worker stops.
    work: threading.Condition = field(init=False)
    ready: deque[_Held] = field(default_factory=deque)
    running: dict[int, _Held] = field(default_factory=dict)
    started_at: dict[int, float] = field(default_factory=dict)
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


class Worker:
    """Runs an app's jobs until stopped: what `oncely run` and `app.run_worker()` start."""

    def __init__(
        self,
        app: App,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT_S,
        http: str | None = None,
        retention: timedelta = timedelta(days=30),
        sweep_every: timedelta = timedelta(minutes=5),
        wake_cap: float = DEFAULT_WAKE_CAP_S,
    ) -> None:
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ConfigurationError(
                f"concurrency={concurrency!r}: give a whole number of handlers to run at once, "
                "1 or more"
            )
        if drain_timeout < 0:
            raise ConfigurationError(f"drain_timeout={drain_timeout!r}: give 0 seconds or more")
        if wake_cap <= 0:
            raise ConfigurationError(f"wake_cap={wake_cap!r}: give more than 0 seconds")
        self.app = app
        self.clock: Callable[[], datetime] = app.now
        self.concurrency = concurrency
        self.drain_timeout = drain_timeout
        self.wake_cap = wake_cap
        self.metrics = Metrics()
        self.health = Health(expected_interval=2 * wake_cap + 5)
        self.outage = Outage()
        self.housekeeping = Housekeeping(
            # Kept after the sweep until `sweep_every` has passed: the fleet sweeps once per it.
            # Not app.lock, which refuses the names oncely reserves for itself.
            Lock(
                HOUSEKEEPING_LOCK,
                at_most=sweep_every,
                at_least=sweep_every,
                provider=StoreProvider(lambda: app.store, app.now),
                owner=worker_id,
            ),
            retention=retention,
            every=sweep_every,
        )
        self._engine: Engine | None = None
        if http is not None:
            parse_address(http)  # a bad address fails here, not after the loop started
        self._http_address = http
        self._server: HttpServer | None = None
        self._shared = _Shared()
        self.metrics.in_flight_from(lambda: self.in_flight)
        # Claims taken just ahead of their time, started by the loop when it comes.
        self._early: list[_Held] = []
        self._unbooked: list[Finished] = []
        self._wake = _Wake()
        self._stopping = False
        self._signalled: str | None = None
        self._changed = True
        self._due_at: datetime | None = None
        self._prepared_at = float("-inf")
        # The first minute's check is the start's: the clock syncs and the code reconciles then.
        self._minutely_at = time.monotonic()
        self._lead = _Lead()
        self._prefetch = concurrency
        self._ahead_to: datetime | None = None
        self._more_waiting = False
        self._watch: Watch | None = None
        self._watch_supported = True

    @property
    def engine(self) -> Engine:
        """The app's engine, opened (store connected, migrated) on first use.

        Opened by the loop, not before it: a database that is down when the worker starts is an
        outage to wait out like any other, not a reason to exit.
        """
        if self._engine is None:
            engine = self.app._the_engine()
            engine.store.reserve(self.concurrency + _OWN_CONNECTIONS)
            self._engine = engine
        return self._engine

    @property
    def store(self) -> Store:
        return self.engine.store

    # --- control -----------------------------------------------------------------------------

    def run(self) -> None:
        """Serve until `stop()` or SIGTERM/SIGINT, then drain; returns when drained.

        Signals are handled only when called on the main thread: the first stops claiming and
        lets running handlers finish within ``drain_timeout``; a second exits at once.
        """
        restore = self._install_signals()
        if self._http_address is not None:
            server = HttpServer(self._http_address, self.health, self.metrics)
            server.start()
            self._server = server  # only once bound: http_address reads the bound port
            log.info("oncely: health and metrics on http://%s", self.http_address)
        log.info(
            "oncely: worker %s serving %d job(s) with up to %d handler(s) at once",
            worker_id(),
            len(self.app.jobs),
            self.concurrency,
        )
        try:
            self._loop()
        finally:
            restore()
            if self._watch is not None:
                self._watch.close()
            if self._server is not None:
                self._server.close()

    def stop(self, drain_timeout: float | None = None) -> None:
        """Stop claiming and drain (thread-safe; returns at once, `run` returns when drained).

        ``drain_timeout``, when given, replaces the one the worker was built with; it counts only
        if the loop has not begun draining yet.
        """
        if drain_timeout is not None:
            if drain_timeout < 0:
                raise ConfigurationError(f"drain_timeout={drain_timeout!r}: give 0 seconds or more")
            self.drain_timeout = drain_timeout
        self._stopping = True
        with self._shared.work:
            self._shared.work.notify_all()
        self._wake.set()

    @property
    def http_address(self) -> str | None:
        """``HOST:PORT`` of ``/healthz`` and ``/metrics`` while they are served, else None."""
        if self._server is None or self._http_address is None:
            return None
        host, _ = parse_address(self._http_address)
        return f"{host}:{self._server.port}"

    @property
    def in_flight(self) -> int:
        with self._shared.lock:
            return len(self._shared.running)

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.signal(sig, self._on_signal) for sig in _STOP_SIGNALS}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only flags and a pipe write here: the handler runs between any two bytecodes of the
        # main thread, and taking a lock that thread holds (logging's, a queue's) would hang.
        if self._stopping:
            os.write(2, f"oncely: second {signal.Signals(signum).name}: exiting now\n".encode())
            os._exit(128 + signum)
        self._signalled = signal.Signals(signum).name
        self.stop()

    # --- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        drain_until: float | None = None
        while True:
            if self._stopping:
                if drain_until is None:
                    drain_until = time.monotonic() + self.drain_timeout
                    log.info(
                        "oncely: %s: no new claims; waiting up to %.0f s for %d running "
                        "handler(s)%s",
                        self._signalled or "stopping",
                        self.drain_timeout,
                        self.in_flight,
                        " (send it again to exit at once)" if self._signalled else "",
                    )
                    self._release_waiting()
                if not self._busy() or time.monotonic() >= drain_until:
                    break
            delay = self._cycle(draining=drain_until is not None)
            if drain_until is not None:
                if not self._busy():
                    break
                delay = min(delay, max(drain_until - time.monotonic(), 0.0))
            self._wake.wait(delay)
        self._finish_draining()

    def _cycle(self, *, draining: bool) -> float:
        """One turn of the loop; returns how many seconds it may sleep."""
        started = time.monotonic()
        # First, before any round trip: what was claimed ahead starts on time.
        self._start_early()
        try:
            self._ensure_watch()
            booked = self._book()
            self._heartbeat()
            if not draining:
                self._serve(booked)
        except OncelyError as exc:
            self.health.tick_failed(str(exc))
            self.metrics.tick_failed()
            return self.outage.failed(exc, "tick")
        self.outage.recovered()
        self.health.tick_succeeded()
        self.metrics.tick(time.monotonic() - started)
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
        now, started = self.clock(), time.monotonic()
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
        if prepare:
            self._changed = False
            # Only the next due time, and only in the lead before it: a plan "ahead" to a time
            # seconds away treated every occurrence until then as missed and skipped all but
            # the newest.
            ahead_to = (
                self._due_at if early and self._due_at is not None and self._due_at > now else None
            )
            report = TickReport()
            self.engine.prepare(report, ahead_to=ahead_to)
            for job, count in report.abandoned_by_job.items():
                self.metrics.outcome(job, "abandoned", count)
            self._prepared_at = time.monotonic()
            self._ahead_to = ahead_to
        self._pace()
        if prepare or booked or self._more_waiting:
            self._claim(ahead_to)
        if ahead_to is not None:
            # The lead covers writing the rows and claiming them, so both are done by the due
            # time. Measured on these runs only: a prepare at the due time finds the rows
            # written, and learning from it shrank the lead until the next ones came late.
            self._lead.learn(time.monotonic() - started)
        if prepare:
            self.metrics.reclaimed(self.housekeeping.maybe_sweep(self.engine, now))
            self._every_minute()
            self._due_at = self._next_due(now)
        self._start_early()

    def _claims_wait_before_due(self) -> bool:
        """Whether claims taken ahead for a time before ``_due_at`` still wait to start.

        Until they start, the next due time is not prepared ahead: with a lead longer than the
        gap between two due times, its prepare held the loop when these came due, and they
        started only once it was over (with prepares of 0.7 s, every second's occurrences
        started 0.65 s late).
        """
        return (
            self._due_at is not None
            and bool(self._early)
            and self._early[0].claim.run_after < self._due_at
        )

    def _every_minute(self) -> None:
        """Measure the clock's offset to the database, and say this code version is live (and
        apply its declarations if a newer version's workers are gone: a rollback)."""
        if time.monotonic() - self._minutely_at < RESYNC_S:
            return
        self._minutely_at = time.monotonic()
        self.app._sync_clock()
        self.engine.reconciler.check()

    def _next_due(self, now: datetime) -> datetime:
        if self._more_waiting:
            # What is due now is claimed cycle after cycle anyway; counting it as due made every
            # cycle of a burst prepare again (materialise, the wake-up queries): more than a
            # quarter of the loop's time.
            later = self.store.next_due_at(self.engine.jobs, after=now)
            return now + timedelta(seconds=self.wake_cap) if later is None else later
        due = self.store.next_due_at(self.engine.jobs)
        if due is None:
            return now + timedelta(seconds=self.wake_cap)
        if due <= now:
            # Not blind to what comes due later meanwhile: waiting the whole pause out left the
            # next seconds of 2,500 schedules to the other worker alone, 4 seconds in 5.
            later = self.store.next_due_at(self.engine.jobs, after=now)
            pause = now + timedelta(seconds=min(_NOT_OURS_S, self.wake_cap))
            return pause if later is None else min(pause, later)
        return due

    def _delay(self, draining: bool) -> float:
        now = self.clock()
        delays = [self.wake_cap]
        if not draining:
            if self._more_waiting and self._capacity() > 0:
                return 0.0
            if self._due_at is not None:
                no_lead = self._ahead_to == self._due_at or self._claims_wait_before_due()
                lead = 0.0 if no_lead else self._lead.seconds
                delays.append((self._due_at - now).total_seconds() - lead)
            if self._early:
                delays.append((self._early[0].claim.run_after - now).total_seconds())
        beat = self._next_heartbeat()
        if beat is not None:
            delays.append((beat - now).total_seconds())
        stall = self._next_stall()
        if stall is not None:
            delays.append(stall)
        return max(min(delays), 0.0)

    def _busy(self) -> bool:
        with self._shared.lock:
            busy = bool(self._shared.running or self._shared.finished)
        return busy or bool(self._unbooked)

    # --- claims and handlers ------------------------------------------------------------------

    def _capacity(self) -> int:
        """Claims to take now: one per handler slot, and ``_prefetch`` more waiting for one."""
        with self._shared.lock:
            held = len(self._shared.ready) + len(self._shared.running)
        return self.concurrency + self._prefetch - held - len(self._early)

    def _claim(self, ahead_to: datetime | None) -> None:
        """Claim what is due now, or by ``ahead_to``: those wait in ``_early`` for their time."""
        capacity = self._capacity()
        if capacity <= 0:
            self._more_waiting = True
            return
        claims = self.engine.claim(capacity, due_by=ahead_to)
        self._more_waiting = len(claims) == capacity
        reclaimed = sum(1 for claim in claims if claim.reclaimed)
        if reclaimed:
            self.metrics.reclaimed(reclaimed)
        now = self.clock()
        ready = [_Held(c, self.engine.jobs[c.job]) for c in claims if c.run_after <= now]
        early = [_Held(c, self.engine.jobs[c.job]) for c in claims if c.run_after > now]
        if early:
            self._early = sorted([*self._early, *early], key=lambda h: h.claim.run_after)
        with self._shared.lock:
            self._shared.ready.extend(ready)

    def _pace(self) -> None:
        """Size ``_prefetch`` by how fast handlers finish; give back what is over twice it.

        Quick handlers get a long queue (a thousand occurrences due at once took sixty claims of
        sixteen); slow ones a short one, so one worker does not sit on occurrences an idle one
        could run. Until a handler in every slot finishes, the shortest of them so far bounds
        the duration: a slow job is seen as slow while it runs, not only once it is done.
        """
        shared = self._shared
        with shared.lock:
            duration = shared.duration
            if len(shared.running) >= self.concurrency:
                quickest = time.monotonic() - max(shared.started_at.values())
                duration = max(duration or 0.0, quickest)
            waiting = len(shared.ready)
        if duration is None:
            self._prefetch = self.concurrency
        else:
            per_horizon = self.concurrency * _HORIZON_S / max(duration, 1e-6)
            self._prefetch = int(min(max(per_horizon, self.concurrency), _PREFETCH_MAX))
        if waiting > 2 * self._prefetch:
            self._give_back(waiting - self._prefetch)

    def _give_back(self, count: int) -> None:
        """Release the ``count`` claims last in the queue, for any worker to take."""
        with self._shared.lock:
            spare = [self._shared.ready.pop() for _ in range(min(count, len(self._shared.ready)))]
        if not spare:
            return
        try:
            released = self.store.release([held.claim for held in spare], self.clock())
        except OncelyError:
            # Not given back: still ours, to run, not to lose until their leases expire.
            with self._shared.lock:
                self._shared.ready.extend(reversed(spare))
            raise
        self.metrics.outcome("*", "released", released)
        log.debug("oncely: gave back %d claimed occurrence(s) for other workers", released)

    def _start_early(self) -> None:
        """Hand the claims whose time has come to the handlers, and start handler threads."""
        if self._early:
            now = self.clock()
            due = 0
            while due < len(self._early) and self._early[due].claim.run_after <= now:
                due += 1
            if due:
                with self._shared.lock:
                    self._shared.ready.extend(self._early[:due])
                del self._early[:due]
        self._dispatch()

    def _dispatch(self) -> None:
        """Wake idle handler threads for the waiting claims; start more, up to concurrency."""
        shared = self._shared
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

    def _keeping_up(self) -> int:
        """Handler threads awake and not stalled (``_shared.lock`` held)."""
        shared, now = self._shared, time.monotonic()
        stalled = sum(1 for began in shared.started_at.values() if now - began > _STALL_S)
        return shared.awake - stalled

    def _threads_wanted(self) -> int:
        """Handler threads to keep busy for the waiting claims (``_shared.lock`` held)."""
        shared = self._shared
        if shared.duration is None:  # nothing finished yet: one thread per claim
            wanted = len(shared.ready)
        else:
            wanted = math.ceil(len(shared.ready) * shared.duration / _SHARE_S)
        return min(max(wanted, 1), self.concurrency)

    def _next_stall(self) -> float | None:
        """Seconds until the next running handler counts as stalled while claims wait for a
        thread (those stalled already were counted by the dispatch that followed)."""
        shared = self._shared
        now = time.monotonic()
        with shared.lock:
            if not shared.ready or shared.awake >= self.concurrency:
                return None
            coming = [b + _STALL_S - now for b in shared.started_at.values() if b + _STALL_S > now]
        return min(coming, default=None)

    def _handle(self) -> None:
        """A handler thread: run waiting claims one after another, and wait for more."""
        shared = self._shared
        try:
            while True:
                with shared.work:
                    while not self._stopping and (
                        not shared.ready or self._keeping_up() > self._threads_wanted()
                    ):
                        shared.idle += 1
                        shared.work.wait()
                        shared.idle -= 1
                    if self._stopping:
                        break
                    held = shared.ready.popleft()
                    began = time.monotonic()
                    shared.running[held.claim.occurrence_id] = held
                    shared.started_at[held.claim.occurrence_id] = began
                try:
                    finished = self._run_one(held)
                finally:
                    took = time.monotonic() - began
                    with shared.lock:
                        del shared.running[held.claim.occurrence_id]
                        del shared.started_at[held.claim.occurrence_id]
                        shared.duration = (
                            took
                            if shared.duration is None
                            else shared.duration + _DURATION_WEIGHT * (took - shared.duration)
                        )
                        if finished is not None:
                            shared.finished.append(finished)
                self._wake.set()
        except BaseException:
            log.exception("oncely: a handler thread failed; its claims are left to expire")
            raise
        finally:
            with shared.lock:
                shared.threads -= 1
            self._wake.set()

    def _run_one(self, held: _Held) -> Finished | None:
        executor, job = self.engine.executor, held.job
        if self.clock() >= held.claim.lease_expires_at:
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
                self.store.release([held.claim], self.clock())
            except StoreError:
                log.warning("oncely: the store refused it back; its lease runs out on its own")
            return None
        started = executor.start(held.claim, job)
        if isinstance(started, Finished):
            return started
        held.run = started
        claim = held.claim
        if claim.attempt == 1:
            self.metrics.lag(job.name, (self.clock() - claim.scheduled_for).total_seconds())
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
            self.metrics.outcome(job.name, "unbooked")
            return None
        if isinstance(result, Finished):
            return result
        self.metrics.outcome(job.name, result)
        return None

    def _book(self) -> int:
        """Book finished attempts; keep what the store did not take, to book next cycle."""
        with self._shared.lock:
            self._unbooked.extend(self._shared.finished)
            self._shared.finished.clear()
        if not self._unbooked:
            return 0
        booked = self.engine.executor.book(self._unbooked)
        if any(outcome == "retrying" for _, outcome in booked):
            self._changed = True  # its retry may come due before the next due time computed
        # Counted once per job and outcome, not once per occurrence: in a burst, a metric
        # update per occurrence was a tenth of the loop's time.
        counts = Counter((finished.job.name, outcome) for finished, outcome in booked)
        for (job, outcome), n in counts.items():
            self.metrics.outcome(job, outcome, n)
        return len(booked)

    # --- leases ------------------------------------------------------------------------------

    def _held(self) -> list[_Held]:
        with self._shared.lock:
            return [*self._shared.running.values(), *self._shared.ready, *self._early]

    def _next_heartbeat(self) -> datetime | None:
        held = self._held()
        return min((_heartbeat_at(h) for h in held), default=None)

    def _heartbeat(self) -> None:
        """Extend the lease of every held claim that has used a third of it.

        A claim whose lease was taken over meanwhile (this process was paused past its expiry)
        is told so through ``run.lease_lost``; its completion will be refused when booked.
        """
        now = self.clock()
        for held in self._held():
            if now < _heartbeat_at(held):
                continue
            until = now + held.job.lease
            if self.store.extend(held.claim, until):
                held.claim = extended(held.claim, until)
                if held.run is not None:
                    held.run.claim = held.claim
                continue
            log.warning(
                "oncely: %s %r at %s: lease lost to another worker (this process was too slow "
                "or paused past %s); run.lease_lost is now True and its completion will be refused",
                held.job.name,
                held.claim.key,
                held.claim.scheduled_for.isoformat(),
                held.claim.lease_expires_at.isoformat(),
                extra=claim_fields(held.claim),
            )
            if held.run is not None:
                held.run.mark_lease_lost()
            if held in self._early:
                self._early.remove(held)
            with self._shared.lock:
                if held in self._shared.ready:
                    self._shared.ready.remove(held)

    # --- wake-ups and shutdown ----------------------------------------------------------------

    def _ensure_watch(self) -> None:
        if not self._watch_supported or (self._watch is not None and self._watch.alive):
            return
        self._watch = self.store.watch(self._on_change)
        self._watch_supported = self._watch is not None

    def _on_change(self) -> None:
        self._changed = True
        self._wake.set()

    def _release_waiting(self) -> None:
        with self._shared.lock:
            waiting = [held.claim for held in [*self._shared.ready, *self._early]]
            self._shared.ready.clear()
        self._early.clear()
        if not waiting:
            return
        try:
            released = self.store.release(waiting, self.clock())
        except OncelyError as exc:
            log.warning(
                "oncely: could not give back %d claimed occurrence(s) that never started (%s); "
                "they run once their leases expire",
                len(waiting),
                exc,
            )
            return
        self.metrics.outcome("*", "released", released)
        log.info("oncely: gave back %d claimed occurrence(s) that had not started", released)

    def _finish_draining(self) -> None:
        try:
            self._book()
        except OncelyError as exc:
            log.warning("oncely: %d outcome(s) could not be booked (%s)", len(self._unbooked), exc)
        if self._unbooked:
            log.warning(
                "oncely: exiting with %d outcome(s) not booked; those occurrences run again "
                "once their leases expire",
                len(self._unbooked),
            )
        still = [h.claim for h in self._held()]
        for claim in still:
            log.warning(
                "oncely: %s %r at %s still running after the %.0f s drain timeout; its lease "
                "(until %s) is left to expire",
                claim.job,
                claim.key,
                claim.scheduled_for.isoformat(),
                self.drain_timeout,
                claim.lease_expires_at.isoformat(),
                extra=claim_fields(claim),
            )
        self._mark_left_running(still)
        log.info("oncely: worker %s stopped", worker_id())

    def _mark_left_running(self, claims: list[Claim]) -> None:
        """Say in history, not only in the log, which attempts were left running."""
        if not claims:
            return
        reason = (
            f"worker {worker_id()} stopped after its {self.drain_timeout:g} s drain timeout with "
            "this attempt still running; its lease was left to expire"
        )
        try:
            self.store.mark_left_running(claims, reason)
        except OncelyError as exc:
            log.warning(
                "oncely: could not record %d attempt(s) left running (%s)", len(claims), exc
            )


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Wake:
    """What the loop sleeps on: a pipe, so that a signal handler can wake it without a lock.

    (`threading.Event.set` takes a lock; from a signal handler that interrupted the loop's own
    `Event.wait`, that could hang.)
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._pending = False

    def set(self) -> None:
        # One byte per sleep, not one per finished handler: a burst's handler threads spent
        # more time in this write (waiting to take the GIL back) than in their handlers.
        if self._pending:
            return
        self._pending = True
        with contextlib.suppress(BlockingIOError):  # full pipe: a wake-up is pending anyway
            os.write(self._write, b"!")

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds or until `set`; clears pending wake-ups."""
        select.select([self._read], [], [], max(timeout, 0.0))
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 4096):
                pass
        # Cleared after the drain, before the cycle that follows: a `set` skipped until now is
        # seen by that cycle. Cleared before it, the byte of a `set` made during the drain was
        # read with the rest while `set` stayed skipped: the loop slept its whole delay with
        # every handler idle.
        self._pending = False


class _Lead:
    """How many seconds before a due time to start preparing it: `_LEAD_FACTOR` times what a
    prepare took, growing at once with a longer one and shrinking by at most `_LEAD_DECAY` per
    shorter one, within `_LEAD_MIN` and `_LEAD_MAX`."""

    def __init__(self) -> None:
        self.seconds = _LEAD_MIN

    def learn(self, took: float) -> None:
        wanted = max(_LEAD_FACTOR * took, _LEAD_DECAY * self.seconds)
        self.seconds = min(max(wanted, _LEAD_MIN), _LEAD_MAX)


def _heartbeat_at(held: _Held) -> datetime:
    """When ``held`` has used a third of its job's lease."""
    return held.claim.lease_expires_at - held.job.lease * 2 / 3
