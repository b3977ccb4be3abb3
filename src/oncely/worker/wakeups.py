"""What wakes the worker's loop early: a pipe it sleeps on, and the store's change channel.

The channel (PostgreSQL ``LISTEN``) is an optimisation over the loop's ``wake_cap``: it is opened
and re-opened on a thread of its own, so that a server refusing that one connection never delays
a cycle. Opened on the loop, each cycle failed before it booked or heartbeat while the pool still
worked; leases ran out and another worker re-ran a live worker's occurrence.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
import weakref
from collections.abc import Callable

from oncely.errors import OncelyError
from oncely.store import Store, Watch
from oncely.worker.outage import one_line

log = logging.getLogger("oncely")

# How long a refused channel waits before it tries again (at most wake_cap): the loop looks for
# work every wake_cap meanwhile, so a quicker retry buys nothing and costs the server a
# connection attempt a second.
_RETRY_MAX_S = 30.0


class Wake:
    """What the loop sleeps on: a pipe, so that a signal handler can wake it without a lock.

    (`threading.Event.set` takes a lock; from a signal handler that interrupted the loop's own
    `Event.wait`, that could hang.)
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        # poll, not select: in a process with a thousand files open, the pipe's descriptor was
        # above select's limit (1024) and the loop died ("filedescriptor out of range").
        self._poll = select.poll()
        self._poll.register(self._read, select.POLLIN)
        self._pending = False
        # Closed when the loop object goes, not by a method: `set` may come from another thread
        # or a signal handler after the loop has ended, and would write to a closed descriptor,
        # or to a file that took its number. Never closed, each worker made kept two open.
        weakref.finalize(self, _close, self._read, self._write)

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
        self._poll.poll(max(timeout, 0.0) * 1000)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 4096):
                pass
        # Cleared after the drain, before the cycle that follows: a `set` skipped until now is
        # seen by that cycle. Cleared before it, the byte of a `set` made during the drain was
        # read with the rest while `set` stayed skipped: the loop slept its whole delay with
        # every handler idle.
        self._pending = False


def _close(*descriptors: int) -> None:
    for descriptor in descriptors:
        os.close(descriptor)


class ChangeChannel:
    """Keeps the store's change watch open from a daemon thread; calls ``on_change`` for each
    notice, and ``on_listening(since)`` whenever the watch (re)opens, with the monotonic time it
    listens from: what was committed before it was not announced.

    ``store`` is called on the channel's thread only (opening it may wait on the database).
    A refused connection is logged once at WARNING and retried every ``retry_s``; the first
    success after it is logged once too.
    """

    def __init__(
        self,
        store: Callable[[], Store],
        on_change: Callable[[], None],
        on_listening: Callable[[float], None],
        *,
        wake_cap: float,
    ) -> None:
        self._store = store
        self._on_change = on_change
        self._on_listening = on_listening
        self._wake_cap = wake_cap
        self._retry_s = min(wake_cap, _RETRY_MAX_S)
        self._again = threading.Event()
        self._closed = False
        self._watch: Watch | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._keep, name="oncely-changes", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            watch, self._watch = self._watch, None
        self._again.set()
        if watch is not None:
            watch.close()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=2.0)

    def _changed(self) -> None:
        watch = self._watch
        if watch is None or not watch.alive:
            self._again.set()  # the watch died: open another
        self._on_change()

    def _keep(self) -> None:
        refused = False
        while not self._closed:
            watch = self._watch
            if watch is None or not watch.alive:
                try:
                    watch = self._store().watch(self._changed)
                except OncelyError as exc:
                    if not refused:
                        log.warning(
                            "oncely: the wake-up channel cannot connect (%s); bookings and "
                            "heartbeats go on, and this worker looks for due work every %g s "
                            "until it can listen again",
                            one_line(exc),
                            self._wake_cap,
                        )
                        refused = True
                    self._again.wait(self._retry_s)
                    self._again.clear()
                    continue
                if watch is None:
                    return  # this store has no channel (SQLite): the wake cap is all there is
                with self._lock:
                    if self._closed:
                        watch.close()
                        return
                    self._watch = watch
                if refused:
                    log.warning(
                        "oncely: the wake-up channel is back; changes wake this worker again"
                    )
                    refused = False
                self._on_listening(time.monotonic())
            self._again.wait(self._retry_s)
            self._again.clear()
