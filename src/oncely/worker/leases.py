"""Heartbeats: the leases of every claim a worker holds, extended from a thread of their own.

A lease is only as safe as the heartbeat that extends it. On the loop's thread, heartbeats
waited behind claiming, booking, housekeeping and reconciling (which can wait a minute for its
lock): a loop busy past a lease let another worker take over a live handler's occurrence and run
it a second time. Here nothing but the beat itself runs, one statement for all held leases.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import datetime

from oncely.engine import claim_fields, extended
from oncely.errors import OncelyError
from oncely.model import Claim
from oncely.store import Store
from oncely.worker.outage import Outage
from oncely.worker.pool import Held

log = logging.getLogger("oncely")

# A cycle takes milliseconds; one that has not ended after this long is a stall worth a line.
BLOCKED_S = 3.0
# Longest sleep between looks at what is held: a claim added meanwhile is seen within it.
_LOOK_S = 1.0
# The retry after a failed beat never waits longer than this: backing off for half a minute
# like the loop's outage would let a short lease run out while the store is back.
_RETRY_MAX_S = 1.0


def heartbeat_at(held: Held) -> datetime:
    """When ``held`` has used a third of its job's lease."""
    return held.claim.lease_expires_at - held.job.lease * 2 / 3


class Heartbeats:
    """Extends the leases of what ``held()`` returns once each has used a third of it.

    ``held`` snapshots the claims the worker holds; ``lock`` guards the claims' updates;
    ``forget(held)`` drops a claim whose lease was lost and returns whether the worker still
    held it (one booked or given back meanwhile is not lost, only let go). ``busy()`` says
    since when (monotonic) and in what the loop's current cycle is, or None between cycles:
    a cycle running past `BLOCKED_S` is logged once, and its end.
    """

    def __init__(
        self,
        *,
        store: Callable[[], Store],
        clock: Callable[[], datetime],
        held: Callable[[], list[Held]],
        lock: threading.Lock,
        forget: Callable[[Held], bool],
        busy: Callable[[], tuple[float, str] | None],
    ) -> None:
        self._store = store
        self._clock = clock
        self._held = held
        self._lock = lock
        self._forget = forget
        self._busy = busy
        self._outage = Outage(cap_s=_RETRY_MAX_S)
        self._stopping = threading.Event()
        self._poke = threading.Event()
        # When (monotonic) the thread next looks at what is held; infinity while it looks, so
        # that a claim added after its look began is looked at again.
        self._looks_at = math.inf
        self._blocked: tuple[float, str] | None = None
        self._thread = threading.Thread(target=self._beat, name="oncely-heartbeats", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poke(self, first_beat: datetime) -> None:
        """Look at what is held now if a claim added needs a beat at ``first_beat``, before the
        thread's next look. Woken for every claim taken, its looks over a thousand claims held
        took the GIL from handlers a burst's every few milliseconds."""
        left = (first_beat - self._clock()).total_seconds()
        if time.monotonic() + left < self._looks_at:
            self._poke.set()

    def stop(self) -> None:
        self._stopping.set()
        self._poke.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10.0)

    def _beat(self) -> None:
        while not self._stopping.is_set():
            wait = _LOOK_S
            try:
                wait = min(wait, self.beat())
                self._outage.recovered()
            except OncelyError as exc:
                wait = min(wait, self._outage.failed(exc, "heartbeat"))
            except Exception:
                log.exception("oncely: a heartbeat failed; the next is tried in %g s", _LOOK_S)
            self._watch_the_loop()
            self._looks_at = time.monotonic() + max(wait, 0.0)
            self._poke.wait(max(wait, 0.0))
            self._looks_at = math.inf
            self._poke.clear()

    def beat(self) -> float:
        """Extend every held lease that has used a third of it, in one statement; return the
        seconds until the next one is due."""
        now = self._clock()
        # One snapshot: a claim added after it pokes the thread to look again (`poke`). Every
        # look read all held claims a second time; with a thousand held, each look took the
        # GIL from the handlers for as long again.
        beats = [(heartbeat_at(h), h) for h in self._held()]
        due = [h for at, h in beats if now >= at]
        upcoming = [at for at, _ in beats if now < at]
        if due:
            leases = [(h.claim, now + h.job.lease) for h in due]
            kept = self._store().extend_leases(leases)
            for h, (claim, until) in zip(due, leases, strict=True):
                if claim.occurrence_id in kept:
                    self._extended(h, claim, until)
                    upcoming.append(heartbeat_at(h))
                else:
                    self._lost(h, claim)
        if not upcoming:
            return _LOOK_S
        return (min(upcoming) - self._clock()).total_seconds()

    def _extended(self, held: Held, claim: Claim, until: datetime) -> None:
        with self._lock:
            if held.claim is not claim:
                return  # replaced meanwhile
            held.claim = extended(claim, until)
            if held.run is not None:
                held.run.claim = held.claim

    def _lost(self, held: Held, claim: Claim) -> None:
        if not self._forget(held):
            return  # booked or given back since the snapshot: nothing was lost
        log.warning(
            "oncely: %s %r at %s: lease lost to another worker (this process was too slow "
            "or paused past %s); run.lease_lost is now True and its completion will be refused",
            held.job.name,
            claim.key,
            claim.scheduled_for.isoformat(),
            claim.lease_expires_at.isoformat(),
            extra=claim_fields(claim),
        )
        if held.run is not None:
            held.run.mark_lease_lost()

    def _watch_the_loop(self) -> None:
        busy = self._busy()
        if busy is not None and time.monotonic() - busy[0] >= BLOCKED_S:
            if self._blocked != busy:
                self._blocked = busy
                log.warning(
                    "oncely: the worker's loop has been busy %s for %.0f s; no new claims start "
                    "meanwhile, and heartbeats keep the leases of those held",
                    busy[1],
                    time.monotonic() - busy[0],
                )
            return
        if self._blocked is not None:
            log.warning(
                "oncely: the worker's loop is back after %.1f s %s",
                time.monotonic() - self._blocked[0],
                self._blocked[1],
            )
            self._blocked = None
