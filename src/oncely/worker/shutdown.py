"""Stopping: the signals that stop a worker, and what it does with the claims it still holds."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from datetime import datetime
from types import FrameType

from oncely.engine import claim_fields, worker_id
from oncely.errors import OncelyError
from oncely.model import Claim
from oncely.store import Store
from oncely.worker.metrics import Metrics
from oncely.worker.pool import Shared

log = logging.getLogger("oncely")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Signals:
    """SIGTERM and SIGINT while a worker runs on the main thread: the first calls ``stop``,
    a second exits the process at once."""

    def __init__(self, stop: Callable[[], None], stopping: Callable[[], bool]) -> None:
        self._stop = stop
        self._stopping = stopping
        self.received: str | None = None

    def install(self) -> Callable[[], None]:
        """Handle the stop signals (on the main thread only); return what restores the old."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only flags and a pipe write here: the handler runs between any two bytecodes of the
        # main thread, and taking a lock that thread holds (logging's, a queue's) would hang.
        if self._stopping():
            os.write(2, f"oncely: second {signal.Signals(signum).name}: exiting now\n".encode())
            os._exit(128 + signum)
        self.received = signal.Signals(signum).name
        self._stop()


def release_waiting(
    shared: Shared, store: Store, now: Callable[[], datetime], metrics: Metrics
) -> None:
    """Give back every claim that has not started (waiting for a slot or for its time)."""
    with shared.lock:
        waiting = [held.claim for held in [*shared.ready, *shared.early]]
        shared.ready.clear()
        shared.early.clear()
    if not waiting:
        return
    try:
        released = store.release(waiting, now())
    except OncelyError as exc:
        log.warning(
            "oncely: could not give back %d claimed occurrence(s) that never started (%s); "
            "they run once their leases expire",
            len(waiting),
            exc,
        )
        return
    metrics.outcome("*", "released", released)
    log.info("oncely: gave back %d claimed occurrence(s) that had not started", released)


def leave_running(claims: list[Claim], store: Store, drain_timeout: float) -> None:
    """Log, and say in history, which attempts a worker stopping leaves running."""
    for claim in claims:
        log.warning(
            "oncely: %s %r at %s still running after the %.0f s drain timeout; its lease "
            "(until %s) is left to expire",
            claim.job,
            claim.key,
            claim.scheduled_for.isoformat(),
            drain_timeout,
            claim.lease_expires_at.isoformat(),
            extra=claim_fields(claim),
        )
    if not claims:
        return
    reason = (
        f"worker {worker_id()} stopped after its {drain_timeout:g} s drain timeout with "
        "this attempt still running; its lease was left to expire"
    )
    try:
        store.mark_left_running(claims, reason)
    except OncelyError as exc:
        log.warning("oncely: could not record %d attempt(s) left running (%s)", len(claims), exc)
