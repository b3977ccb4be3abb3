"""The worker: the one loop in oncely that waits on time (DESIGN lessons 2, 10, 12).

Each turn of the loop (a *cycle*) books what handlers finished, materialises and claims what is
due, hands claims to the handler pool (`pool`), and then sleeps until the next thing that needs
it: the next due time (one indexed query), a handler finishing, a change notice (`wakeups`), a
signal, or at the latest ``wake_cap`` seconds, so a change no notification announced is still
seen. Leases are extended by a thread of their own (`leases`), never by the loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from oncely.arguments import checked_retention
from oncely.engine import Engine, calling, worker_id
from oncely.errors import ConfigurationError, OncelyError
from oncely.locks import Lock
from oncely.store import Store
from oncely.worker.cycle import Cycle
from oncely.worker.health import Health
from oncely.worker.housekeeping import LEASE_NAME as HOUSEKEEPING_LOCK
from oncely.worker.housekeeping import Housekeeping
from oncely.worker.leases import Heartbeats
from oncely.worker.metrics import Metrics
from oncely.worker.outage import Outage
from oncely.worker.parts import Assembles
from oncely.worker.pool import HandlerPool, Shared
from oncely.worker.schedule_states import Reading, ScheduleStates
from oncely.worker.server import HttpServer, parse_address
from oncely.worker.shutdown import Signals, leave_running, release_waiting
from oncely.worker.wakeups import ChangeChannel, Wake

log = logging.getLogger("oncely")

DEFAULT_CONCURRENCY = 8
DEFAULT_DRAIN_TIMEOUT_S = 30.0
DEFAULT_WAKE_CAP_S = 30.0
# Store users besides the handlers: the loop (claims, bookings, housekeeping) and heartbeats.
_OWN_CONNECTIONS = 2


class Worker:
    """Runs an app's jobs until stopped: what `oncely run` and `app.run_worker()` start."""

    def __init__(
        self,
        app: Assembles,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT_S,
        http: str | None = None,
        retention: timedelta | str = timedelta(days=30),
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
        if http is not None:
            parse_address(http)  # a bad address fails here, not after the loop started
        parts = app.worker_parts()
        self._parts = parts
        self.clock: Callable[[], datetime] = parts.clock
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
                provider=parts.locks,
                owner=worker_id,
            ),
            retention=checked_retention(retention),
            every=sweep_every,
        )
        self._engine: Engine | None = None
        self._engine_lock = threading.Lock()
        self._http_address = http
        self._server: HttpServer | None = None
        self._stopping = False
        self._shared = Shared()
        self._wake = Wake()
        self._pool = HandlerPool(
            self._shared,
            concurrency=concurrency,
            engine=lambda: self.engine,
            clock=self.clock,
            metrics=self.metrics,
            wake_loop=self._wake.set,
        )
        self._cycle = Cycle(
            engine=lambda: self.engine,
            clock=self.clock,
            shared=self._shared,
            pool=self._pool,
            concurrency=concurrency,
            wake_cap=wake_cap,
            housekeeping=self.housekeeping,
            sync_clock=parts.sync_clock,
            poke_heartbeats=lambda first_beat: self._heartbeats.poke(first_beat),
            metrics=self.metrics,
            health=self.health,
            outage=self.outage,
        )
        self._heartbeats = Heartbeats(
            store=lambda: self.store,
            clock=self.clock,
            held=self._shared.held,
            lock=self._shared.lock,
            forget=self._shared.forget,
            busy=lambda: self._cycle.step,
        )
        self._changes = ChangeChannel(
            lambda: self.store, self._on_change, self._on_listening, wake_cap=wake_cap
        )
        self._signals = Signals(self.stop, lambda: self._stopping)
        self.metrics.in_flight_from(lambda: self.in_flight)
        self.metrics.schedules_from(ScheduleStates(self._schedule_states))
        self.health.stuck_from(lambda: (self._pool.stuck(), self.concurrency))

    @property
    def engine(self) -> Engine:
        """This worker's engine, opened (store connected, migrated) on first use.

        Opened by the loop, not before it: a database that is down when the worker starts is an
        outage to wait out like any other, not a reason to exit.
        """
        engine = self._engine
        if engine is None:
            # The loop, the heartbeats and the change channel each ask first, from their threads.
            with self._engine_lock:
                engine = self._engine
                if engine is None:
                    engine = self._parts.engine()
                    engine.store.reserve(self.concurrency + _OWN_CONNECTIONS)
                    self._engine = engine
        return engine

    @property
    def store(self) -> Store:
        return self.engine.store

    def _schedule_states(self) -> Reading | None:
        # Never opens the engine: a scrape is no reason to connect and migrate.
        engine = self._engine
        return None if engine is None else engine.store.schedule_states()

    # --- control -----------------------------------------------------------------------------

    def run(self) -> None:
        """Serve until `stop()` or SIGTERM/SIGINT, then drain; returns when drained.

        Signals are handled only when called on the main thread: the first stops claiming and
        lets running handlers finish within ``drain_timeout``; a second exits at once.
        """
        self.listen()
        restore = self._signals.install()
        log.info(
            "oncely: worker %s serving %d job(s) with up to %d handler(s) at once",
            worker_id(),
            len(self._parts.jobs()),
            self.concurrency,
        )
        self._heartbeats.start()
        self._changes.start()
        try:
            self._loop()
        finally:
            restore()
            self._changes.close()
            self._heartbeats.stop()
            if self._server is not None:
                self._server.close()
            if self._engine is not None:
                self._engine.close()

    def listen(self) -> None:
        """Serve ``/healthz`` and ``/metrics`` if ``http`` was given (once; `run` calls it).

        Raises `ConfigurationError` when the address cannot be listened on (in use, say): a
        caller that starts the loop on another thread calls it first, so the error reaches it.
        """
        if self._http_address is None or self._server is not None:
            return
        server = HttpServer(self._http_address, self.health, self.metrics)
        server.start()
        self._server = server  # only once bound: http_address reads the bound port
        ports = server.ports
        log.info(
            "oncely: health and metrics on http://%s%s",
            self.http_address,
            f" (the first free port of {ports[0]}-{ports[-1]})" if len(ports) > 1 else "",
        )

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
        self._pool.stop()
        self._wake.set()

    def calling(self) -> bool:
        """Whether the calling code runs inside one of this worker's handlers."""
        executor = calling()
        engine = self._engine  # None until the loop opened it: then no handler of it runs
        return executor is not None and engine is not None and executor is engine.executor

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

    # --- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        drain_until: float | None = None
        while True:
            if self._stopping:
                if drain_until is None:
                    drain_until = time.monotonic() + self.drain_timeout
                    signalled = self._signals.received
                    log.info(
                        "oncely: %s: no new claims; waiting up to %.0f s for %d running "
                        "handler(s)%s",
                        signalled or "stopping",
                        self.drain_timeout,
                        self.in_flight,
                        " (send it again to exit at once)" if signalled else "",
                    )
                    if self._engine is not None:
                        release_waiting(self._shared, self.store, self.clock, self.metrics)
                if not self._cycle.busy() or time.monotonic() >= drain_until:
                    break
            delay = self._cycle.turn(draining=drain_until is not None)
            if drain_until is not None:
                if not self._cycle.busy():
                    break
                delay = min(delay, max(drain_until - time.monotonic(), 0.0))
            self._wake.wait(delay)
        self._finish_draining()

    # --- wake-ups and shutdown ----------------------------------------------------------------

    def _on_change(self) -> None:
        self._cycle.changed()
        self._wake.set()

    def _on_listening(self, since: float) -> None:
        if self._cycle.listening_since(since):
            self._wake.set()

    def _finish_draining(self) -> None:
        if self._engine is None:
            log.info("oncely: worker %s stopped", worker_id())
            return
        unbooked = self._cycle.unbooked
        try:
            self._cycle.book()
        except OncelyError as exc:
            log.warning("oncely: %d outcome(s) could not be booked (%s)", len(unbooked), exc)
        if unbooked:
            log.warning(
                "oncely: exiting with %d outcome(s) not booked; those occurrences run again "
                "once their leases expire",
                len(unbooked),
            )
        leave_running([h.claim for h in self._shared.held()], self.store, self.drain_timeout)
        try:
            self.store.forget_worker(worker_id())
        except OncelyError as exc:
            log.warning("oncely: the worker's row stays until housekeeping deletes it (%s)", exc)
        log.info("oncely: worker %s stopped", worker_id())
