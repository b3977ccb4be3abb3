"""The worker loop on a background thread of a process that does other things: `App.start`.

A web server runs oncely this way in every one of its processes: each process runs the same loop
`oncely run` does, claims under leases keep every occurrence to one run, and the server's own
shutdown (lifespan, ``worker_exit``, interpreter exit) drains it.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from datetime import timedelta

from oncely.errors import ConfigurationError
from oncely.worker.loop import DEFAULT_CONCURRENCY, DEFAULT_DRAIN_TIMEOUT_S, Worker
from oncely.worker.parts import Assembles

log = logging.getLogger("oncely")

# Of a stop's timeout, the part kept for what follows the drain (booking the last outcomes,
# recording the attempts left running, closing the watch), so that stop returns within it.
_WIND_DOWN_MAX_S = 2.0
_WIND_DOWN_SHARE = 0.25


class Embedded:
    """One app's worker loop on a daemon thread: at most one serving per process at a time.

    Thread-safe. A process forked from one whose loop was running starts with none (see
    `after_fork`): the loop's thread, connections and locks stay with the parent.
    """

    def __init__(self, app: Assembles) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._serving: tuple[Worker, threading.Thread] | None = None
        self._stopping: list[tuple[Worker, threading.Thread]] = []

    @property
    def worker(self) -> Worker | None:
        """The worker serving now, if any (not one that is still stopping)."""
        with self._lock:
            serving = self._serving
        if serving is None or not serving[1].is_alive():
            return None
        return serving[0]

    def start(
        self,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        http: str | None = None,
        retention: timedelta | str = timedelta(days=30),
    ) -> bool:
        """Start the loop unless it is serving already; return whether this call started it.

        Raises `ConfigurationError` for options the worker cannot use, an ``http`` address
        that cannot be listened on included, before anything starts.
        """
        with self._lock:
            if self._serving is not None and self._serving[1].is_alive():
                return False
            worker = Worker(
                self._app,
                concurrency=concurrency,
                drain_timeout=DEFAULT_DRAIN_TIMEOUT_S,
                http=http,
                retention=retention,
            )
            # Bound here, not on the loop's thread: an address in use was logged as a failed
            # loop there, and start() returned as if serving.
            worker.listen()
            # A daemon thread: interpreter exit joins non-daemon threads *before* it runs atexit
            # hooks, so a plain thread would hang exit before the hook below could stop it.
            thread = threading.Thread(
                target=_serve, args=(worker,), name="oncely-worker", daemon=True
            )
            thread.start()
            self._serving = (worker, thread)
            atexit.unregister(self._at_exit)
            atexit.register(self._at_exit)
        return True

    def stop(self, timeout: float = DEFAULT_DRAIN_TIMEOUT_S) -> None:
        """Stop claiming, let running handlers finish, and return within ``timeout`` seconds.

        A handler still running near the timeout is left running: its lease is left to expire
        and its occurrence's history says so. Called from inside one of this app's handlers it
        only asks the loop to stop and returns at once: waiting would wait for itself.
        """
        if not isinstance(timeout, int | float) or timeout < 0:
            raise ConfigurationError(f"timeout={timeout!r}: give 0 seconds or more")
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._serving is not None:
                worker, thread = self._serving
                self._serving = None
                wind_down = min(_WIND_DOWN_MAX_S, timeout * _WIND_DOWN_SHARE)
                worker.stop(drain_timeout=timeout - wind_down)
                self._stopping.append((worker, thread))
            self._stopping = [(w, t) for w, t in self._stopping if t.is_alive()]
            waiting = list(self._stopping)
            if not waiting:
                atexit.unregister(self._at_exit)
        if not waiting:
            return
        if any(_inside(worker, thread) for worker, thread in waiting):
            log.info(
                "oncely: stop() called from inside a handler: the worker stops claiming now and "
                "finishes once its running handlers, this one included, return"
            )
            return
        for _, thread in waiting:
            thread.join(max(deadline - time.monotonic(), 0.0))
        left = sum(1 for _, thread in waiting if thread.is_alive())
        if left:
            log.warning(
                "oncely: the background worker did not finish stopping within %g s; it goes on "
                "stopping on its own",
                timeout,
            )

    def after_fork(self) -> None:
        """Forget the parent's loop in a forked child (its thread does not exist there)."""
        self._lock = threading.Lock()
        self._serving = None
        self._stopping = []

    def _at_exit(self) -> None:
        self.stop()


def _serve(worker: Worker) -> None:
    try:
        worker.run()
    except BaseException:
        # A thread's exception would otherwise go to threading.excepthook, once, on stderr,
        # while the web server went on serving without a scheduler.
        log.exception(
            "oncely: the background worker loop failed and stopped; no jobs run in this process "
            "until app.start() is called again"
        )


def _inside(worker: Worker, thread: threading.Thread) -> bool:
    """True when the caller is ``worker``'s loop thread or one of its handlers."""
    return threading.current_thread() is thread or worker.calling()
