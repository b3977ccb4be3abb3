"""A tick: everything due now, in steps that each commit on their own (DESIGN lessons 1, 11).

The steps run in order -- reconcile code-declared schedules (first tick only), abandon
at_most_once occurrences whose worker was lost, materialise due occurrences, claim and run them --
and a tick stops at the first step that fails: the later steps never run on a view the failure
rolled back. The failure is raised as `TickFailed` naming the step.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from oncely.engine.bridge import AsyncBridge
from oncely.engine.execute import Executor, extended
from oncely.engine.job import Job
from oncely.engine.misfire import plan
from oncely.engine.reconcile import reconcile
from oncely.errors import OncelyError, TickFailed
from oncely.model import Claim, Schedule
from oncely.store import Store

log = logging.getLogger("oncely")

_SCHEDULE_BATCH = 100
# Claims are taken in batches sized by how long the last batch's handlers took: quick handlers
# get large batches (few round trips per occurrence), slow ones small batches, so one worker does
# not sit on occurrences an idle one could run.
_FIRST_BATCH = 8
_MAX_BATCH = 256
_QUICK_BATCH_S = 0.05


def _next_batch(batch: int, claimed: int, seconds: float) -> int:
    if claimed < batch:
        return batch  # the batch was not the limit: nothing to learn
    if seconds < _QUICK_BATCH_S:
        return min(batch * 2, _MAX_BATCH)
    return max(batch // 2, 1)


@dataclass
class TickReport:
    """What one tick did."""

    materialised: int = 0
    abandoned: int = 0
    invalid: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def ran(self) -> int:
        return sum(self.outcomes.values())

    def count(self, outcome: str, n: int = 1) -> None:
        if n:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + n


def worker_id() -> str:
    """This process as a lease owner: ``hostname#pid`` (read each time: a fork changes it)."""
    return f"{socket.gethostname()}#{os.getpid()}"


class Engine:
    """Ticks one store for one set of jobs."""

    def __init__(
        self, store: Store, jobs: Mapping[str, Job], clock: Callable[[], datetime]
    ) -> None:
        self.store = store
        self.jobs = jobs
        self.clock = clock
        self.bridge = AsyncBridge()
        self.executor = Executor(store, clock, self.bridge, random.Random())
        self.reconciled = False
        self._batch = _FIRST_BATCH

    def tick(self) -> TickReport:
        report = TickReport()
        steps: list[tuple[str, Callable[[TickReport], None]]] = [
            ("abandon", self._abandon),
            ("materialise", self._materialise),
            ("run", self._run),
        ]
        if not self.reconciled:
            steps.insert(0, ("reconcile", self._reconcile))
        for name, step in steps:
            try:
                step(report)
            except OncelyError as exc:
                raise TickFailed(
                    f"tick step {name!r} failed and the steps after it did not run: {exc}",
                    step=name,
                ) from exc
        return report

    def _reconcile(self, report: TickReport) -> None:
        reconcile(self.store, self.jobs, self.clock())
        self.reconciled = True

    def _abandon(self, report: TickReport) -> None:
        at_most_once = [name for name, job in self.jobs.items() if job.delivery == "at_most_once"]
        if not at_most_once:
            return
        reason = (
            "abandoned: the worker was lost during the call (lease expired); at_most_once never "
            "runs it again"
        )
        for lost in self.store.abandon_expired(now=self.clock(), jobs=at_most_once, reason=reason):
            report.abandoned += 1
            log.error(
                "oncely: %r at %s abandoned: worker %s was lost during attempt %d and the job is "
                "at_most_once, so it is not run again",
                lost.key,
                lost.scheduled_for.isoformat(),
                lost.owner,
                lost.attempts,
            )

    def _materialise(self, report: TickReport) -> None:
        seen: set[tuple[str | None, str]] = set()
        while True:
            now = self.clock()
            due = self.store.due_schedules(now, self.jobs, _SCHEDULE_BATCH)
            fresh = [s for s in due if (s.tenant, s.key) not in seen]
            for schedule in fresh:
                seen.add((schedule.tenant, schedule.key))
                report.materialised += self._materialise_one(schedule, now, report)
            if len(due) < _SCHEDULE_BATCH or not fresh:
                return

    def _materialise_one(self, schedule: Schedule, now: datetime, report: TickReport) -> int:
        job = self.jobs[schedule.job]
        if schedule.trigger is None:
            reason = f"invalid: {schedule.status_reason}"
            self.store.mark_invalid(schedule.tenant, schedule.key, reason, now)
            report.invalid += 1
            log.error(
                "oncely: schedule %r stopped: its stored trigger no longer reads (%s); every "
                "other schedule goes on. Save it again with a valid trigger to restart it",
                schedule.key,
                schedule.status_reason,
            )
            return 0
        assert schedule.next_run_at is not None
        decided = plan(schedule.trigger, schedule.next_run_at, job, now)
        return self.store.materialise(
            schedule.tenant,
            schedule.key,
            decided.planned,
            expected_next_run_at=schedule.next_run_at,
            next_run_at=decided.next_run_at,
            now=now,
            overlap=job.overlap,
        )

    def _run(self, report: TickReport) -> None:
        names = list(self.jobs)
        reclaim = [n for n, job in self.jobs.items() if job.delivery != "at_most_once"]
        serial = [n for n, job in self.jobs.items() if job.overlap != "allow"]
        lease = max((job.lease for job in self.jobs.values()), default=timedelta(minutes=5))
        while True:
            claims = self.store.claim_due(
                owner=worker_id(),
                lease=lease,
                limit=self._batch,
                now=self.clock(),
                jobs=names,
                reclaim=reclaim,
                serial=serial,
            )
            if not claims:
                return
            started = time.monotonic()
            ran: list[Claim] = []
            for claimed in claims:
                claim = self._fresh_lease(claimed, lease, ran, report)
                if claim is None:
                    continue
                outcome = self.executor.execute(claim, self.jobs[claim.job])
                if outcome == "ran":
                    ran.append(claim)
                else:
                    report.count(outcome)
            self._book(ran, report)
            self._batch = _next_batch(self._batch, len(claims), time.monotonic() - started)

    def _book(self, ran: list[Claim], report: TickReport) -> None:
        if ran:
            booked = self.executor.book_successes(ran)
            report.count("succeeded", booked)
            report.count("lease_lost", len(ran) - booked)
            ran.clear()

    def _fresh_lease(
        self, claim: Claim, lease: timedelta, ran: list[Claim], report: TickReport
    ) -> Claim | None:
        """``claim`` with at least half its lease ahead, or None if it was taken over meanwhile.

        Claims are taken in batches and run one after another; without this, the last of a batch
        of slow handlers could start on a lease about to expire and run twice. Successes waiting
        to be booked are booked first, so none of them outlives its lease either.
        """
        now = self.clock()
        if claim.lease_expires_at - now >= lease / 2:
            return claim
        self._book(ran, report)
        until = now + lease
        if not self.store.extend(claim, until):
            return None
        return extended(claim, until)

    def close(self) -> None:
        self.bridge.close()
