"""Code-declared schedules, brought in line with the code that runs (DESIGN: reconciliation).

Each job declared with a trigger has the schedule keyed by its name. A changed trigger replaces
the future from now, with no replay of the past; an unchanged one keeps its next run, so starting
more instances changes nothing. A code-declared schedule whose job is gone from the code stops
firing (status ``removed``) and keeps its history.

Which code's declarations apply is decided by version, not by who started last. A version is the
fingerprint of the declarations; the one first seen last is the newest. A worker whose version
is older than the one applied last leaves the schedules alone while a worker of that newer
version is live (seen in the last `LIVE`): during a rolling deploy an old worker that restarts
(a crash, an autoscaler) does not put its triggers back or revive a removed job. Once no worker
of the newer version is left (a rollback), the older version applies, within a minute or so of
`LIVE` running out, on the next check of a running worker.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from oncely.clock import RESYNC_S
from oncely.engine.job import Job
from oncely.locks import RESERVED_LOCK_PREFIX, Lock, StoreProvider
from oncely.model import CodeVersion
from oncely.store import Store

log = logging.getLogger("oncely")

#: A version is live while a worker running it was seen this recently; running workers say so
#: every `RESYNC_S`.
LIVE = timedelta(seconds=3 * RESYNC_S)
_LOCK = f"{RESERVED_LOCK_PREFIX}reconcile"


def fingerprint(jobs: Mapping[str, Job]) -> str:
    """The code version of ``jobs``: a digest of the code-declared jobs and their triggers."""
    declared = sorted(
        (name, job.trigger.to_spec()) for name, job in jobs.items() if job.trigger is not None
    )
    text = json.dumps(declared, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def may_apply(mine: CodeVersion, applied: CodeVersion | None, now: datetime) -> bool:
    """Whether ``mine``'s declarations may replace those applied last."""
    if applied is None or applied.fingerprint == mine.fingerprint:
        return True
    if mine.first_seen_at >= applied.first_seen_at:
        return True  # newer code (or seen first at the same instant: the later start decides)
    return applied.last_seen_at < now - LIVE  # older code, once nothing newer runs


class Reconciler:
    """Applies one app's code declarations when its version may (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        jobs: Mapping[str, Job],
        clock: Callable[[], datetime],
        owner: Callable[[], str],
    ) -> None:
        self.store = store
        self.jobs = jobs
        self.clock = clock
        self._lock = Lock(
            _LOCK,
            at_most=timedelta(minutes=1),
            provider=StoreProvider(lambda: store, clock),
            owner=owner,
            blocking=True,
            timeout=60,
        )
        self._declined: str | None = None  # the newer version last logged as in the way
        self._seen_at: datetime | None = None  # when this version was last said to be live

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.jobs)

    def start(self) -> None:
        """At start: apply the declarations unless a newer version is live."""
        self._apply(self.fingerprint)

    def check(self) -> None:
        """While running (every minute): say this version is live, and apply its declarations if
        the version applied is another one that may now be replaced (a rollback)."""
        version = self.fingerprint
        self._seen_at = self.clock()
        mine, applied = self.store.see_code_version(version, self._seen_at)
        if applied is not None and applied.fingerprint == mine.fingerprint:
            return
        if not may_apply(mine, applied, self.clock()):
            self._decline(mine, applied)
            return
        self._apply(version)

    def check_when_due(self) -> None:
        """`check`, at most once every `RESYNC_S` of the app's clock: for a process that only
        calls ``tick()``, which was seen once, at its first tick, and so looked gone to an old
        release restarting three minutes later, which rolled the schedules back under it."""
        now = self.clock()
        if self._seen_at is None or now - self._seen_at >= timedelta(seconds=RESYNC_S):
            self.check()

    def _apply(self, version: str) -> None:
        with self._lock:
            # Decided under the lock: another version may have applied since.
            now = self.clock()
            self._seen_at = now
            mine, applied = self.store.see_code_version(version, now)
            if not may_apply(mine, applied, now):
                self._decline(mine, applied)
                return
            if applied is not None and applied.fingerprint != mine.fingerprint:
                log.warning(
                    "oncely: applying this worker's job declarations (version %s) over those of "
                    "version %s, %s",
                    mine.fingerprint,
                    applied.fingerprint,
                    "an older version"
                    if mine.first_seen_at >= applied.first_seen_at
                    else f"a newer one no worker has run since {applied.last_seen_at:%H:%M:%S} UTC",
                )
            reconcile(self.store, self.jobs, now)
            self.store.mark_code_applied(version, now)
            self._declined = None

    def _decline(self, mine: CodeVersion, applied: CodeVersion | None) -> None:
        assert applied is not None
        if self._declined == applied.fingerprint:
            return
        self._declined = applied.fingerprint
        log.warning(
            "oncely: this worker's job declarations (version %s, first seen %s UTC) are older "
            "than those of version %s, which a running worker uses: the schedules keep version "
            "%s's triggers, and this worker runs the occurrences of the jobs it knows. If this is "
            "a rollback, they switch %s after the last worker of %s stops",
            mine.fingerprint,
            f"{mine.first_seen_at:%Y-%m-%d %H:%M:%S}",
            applied.fingerprint,
            applied.fingerprint,
            f"{LIVE.total_seconds() / 60:.0f} minutes",
            applied.fingerprint,
        )


def reconcile(store: Store, jobs: Mapping[str, Job], now: datetime) -> None:
    declared = {name: job for name, job in jobs.items() if job.trigger is not None}
    for name, job in declared.items():
        assert job.trigger is not None
        first = job.trigger.next_after(now)
        store.save_schedule(
            tenant=None,
            key=name,
            job=name,
            origin="code",
            trigger=job.trigger,
            payload=None,
            next_run_at=first,
            now=now,
        )
    for key in store.code_schedule_keys():
        if key not in declared:
            store.remove_schedule(None, key, now)
            log.warning(
                "oncely: job %r is no longer declared in code; its schedule stops firing and "
                "its history stays",
                key,
            )
