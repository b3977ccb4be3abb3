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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from oncely.engine.bridge import AsyncBridge
from oncely.engine.execute import Executor, Finished, extended
from oncely.engine.job import Job
from oncely.engine.misfire import plan, superseded_by
from oncely.engine.reconcile import Reconciler
from oncely.errors import OncelyError, TickFailed
from oncely.model import (
    Claim,
    Claims,
    Materialisation,
    Schedule,
    SkipCause,
    Skipped,
    skip_cause,
)
from oncely.store import Store

log = logging.getLogger("oncely")

_SCHEDULE_BATCH = 100
_DEFAULT_LEASE = timedelta(minutes=5)
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
    """What one tick did.

    ``skipped``: occurrences this tick recorded as skipped, by (job, `SkipCause`), wherever it
    wrote them (materialising, claiming, or starting one too late); ``paused_by_job``: schedules
    its bookings paused (pause_after); ``invalid_by_job``: schedules it stopped as invalid. Each
    counts only what this process wrote, never what another did to the same rows. ``behind``:
    materialising ran out of its budget with due schedules left for the next prepare.
    """

    materialised: int = 0
    abandoned: int = 0
    abandoned_by_job: dict[str, int] = field(default_factory=dict)
    invalid: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    skipped: dict[tuple[str, SkipCause], int] = field(default_factory=dict)
    paused_by_job: dict[str, int] = field(default_factory=dict)
    invalid_by_job: dict[str, int] = field(default_factory=dict)
    behind: bool = False

    @property
    def ran(self) -> int:
        return sum(self.outcomes.values())

    def count(self, outcome: str, n: int = 1) -> None:
        if n:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + n

    def skip(self, skipped: Iterable[Skipped]) -> None:
        for one in skipped:
            self.skipped[one.job, one.cause] = self.skipped.get((one.job, one.cause), 0) + 1

    def booked(self, booked: Iterable[tuple[Finished, str]]) -> None:
        """Count the skips and pauses of what `Executor.book` booked (not its outcomes)."""
        for finished, outcome in booked:
            if outcome == "skipped":
                self.skip([Skipped(finished.job.name, skip_cause(finished.skipped or ""))])
            if finished.paused:
                job = finished.job.name
                self.paused_by_job[job] = self.paused_by_job.get(job, 0) + 1


def worker_id() -> str:
    """This process as a lease owner: ``hostname#pid`` (read each time: a fork changes it)."""
    return f"{socket.gethostname()}#{os.getpid()}"


def _step(name: str, step: Callable[[TickReport], None], report: TickReport) -> None:
    try:
        step(report)
    except OncelyError as exc:
        raise TickFailed(
            f"tick step {name!r} failed and the steps after it did not run: {exc}", step=name
        ) from exc


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
        self.reconciler = Reconciler(store, jobs, clock, worker_id)
        self.reconciled = False
        self._batch = _FIRST_BATCH
        self._turn = 0
        # Due schedules up to this time may be left, for the next prepare; None: none are.
        self._backlog_until: datetime | None = None

    def tick(self) -> TickReport:
        """Everything due now, run in this thread; raises `TickFailed` naming the failing step."""
        report = TickReport()
        if self.reconciled:
            _step("reconcile", lambda _: self.reconciler.check_when_due(), report)
        self.prepare(report)
        _step("run", self._run, report)
        return report

    def prepare(
        self,
        report: TickReport,
        *,
        ahead_to: datetime | None = None,
        budget: float | None = None,
    ) -> None:
        """The steps before running: reconcile (once), resume the schedules whose pause ended,
        abandon lost at_most_once attempts, materialise what is due. Raises `TickFailed` at the
        first step that fails.

        ``ahead_to`` (the worker's next due time, a moment away) also materialises what comes
        due by then, as pending rows that become claimable at their time: at that time the
        worker only claims, instead of first writing every row that came due at once.

        ``budget``: seconds to spend materialising, after which the rest waits for the next
        prepare (``report.behind``), so that the caller can claim and run what is written first.
        """
        if not self.reconciled:
            _step("reconcile", self._reconcile, report)
        _step("resume", self._resume, report)
        _step("abandon", self._abandon, report)
        _step("materialise", lambda r: self._materialise(r, ahead_to, budget), report)

    def claim(self, limit: int, *, due_by: datetime | None = None) -> Claims:
        """Claim up to ``limit`` occurrences of this engine's jobs due now (or by ``due_by``,
        a moment ahead: the caller starts each at its ``run_after``) for this process; the
        result's ``skipped`` are the occurrences the claims recorded as skipped (overlap).

        Each claim's lease is its own job's: one claim per distinct lease, taking turns first so
        that no group of jobs always gets the whole limit. (One lease for all, the longest,
        kept a crashed worker's 30-second-lease occurrences waiting five minutes.)
        """
        groups = self._lease_groups()
        turn = self._turn % len(groups)
        self._turn += 1
        claims = Claims()
        for lease, jobs in [*groups[turn:], *groups[:turn]]:
            if len(claims) >= limit:
                break
            taken = self.store.claim_due(
                owner=worker_id(),
                lease=lease,
                limit=limit - len(claims),
                now=self.clock(),
                jobs=[job.name for job in jobs],
                reclaim=[job.name for job in jobs if job.delivery != "at_most_once"],
                serial=[job.name for job in jobs if job.overlap != "allow"],
                due_by=due_by,
                skip=[job.name for job in jobs if job.overlap == "skip"],
            )
            claims += taken
            claims.skipped += taken.skipped
        return claims

    def _lease_groups(self) -> list[tuple[timedelta, list[Job]]]:
        by_lease: dict[timedelta, list[Job]] = {}
        for job in self.jobs.values():
            by_lease.setdefault(job.lease, []).append(job)
        return sorted(by_lease.items(), key=lambda item: item[0]) or [(_DEFAULT_LEASE, [])]

    def _reconcile(self, report: TickReport) -> None:
        self.reconciler.start()
        self.reconciled = True

    def _resume(self, report: TickReport) -> None:
        # Before materialising: the first occurrence after a pause's end is planned in the
        # same prepare as the resume, as if resumed by hand at that moment.
        for action in self.store.resume_ended_pauses(self.clock(), f"oncely ({worker_id()})"):
            log.info("oncely: schedule %r resumed: %s", action.key, action.reason)

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
            report.abandoned_by_job[lost.job] = report.abandoned_by_job.get(lost.job, 0) + 1
            log.error(
                "oncely: %r at %s abandoned: worker %s was lost during attempt %d and the job is "
                "at_most_once, so it is not run again",
                lost.key,
                lost.scheduled_for.isoformat(),
                lost.owner,
                lost.attempts,
            )

    def _materialise(
        self, report: TickReport, ahead_to: datetime | None, budget: float | None
    ) -> None:
        """Materialise what is due, for at most ``budget`` seconds (at least one batch). What
        is left over is the backlog, which the next prepare takes up again after it has
        materialised what came due since the backlog was left."""
        began = time.monotonic()

        def spent() -> bool:
            return budget is not None and time.monotonic() - began >= budget

        seen: set[tuple[str | None, str]] = set()
        backlog = self._backlog_until
        newly = None
        if backlog is not None:
            # The newly due first: behind a worker's start with 6,000 overdue schedules, an
            # every-second schedule waited for all of them to be written, and missed seconds.
            newly = self._batches(report, ahead_to, seen, spent, after=backlog)
        left = self._batches(report, ahead_to, seen, spent, until=backlog)
        self._backlog_until = left if left is not None else newly
        report.behind = self._backlog_until is not None

    def _batches(
        self,
        report: TickReport,
        ahead_to: datetime | None,
        seen: set[tuple[str | None, str]],
        spent: Callable[[], bool],
        *,
        after: datetime | None = None,
        until: datetime | None = None,
    ) -> datetime | None:
        """Materialise due schedules (next run after ``after``, by ``until`` or now) batch by
        batch, none in ``seen`` twice, until none are left (returns None) or ``spent()`` says
        the time is up (returns the bound up to which some may be left)."""
        while True:
            now = self.clock()
            planned_to = max(now, ahead_to or now, until or now)
            bound = planned_to if until is None else until
            due = self.store.due_schedules(bound, self.jobs, _SCHEDULE_BATCH, after=after)
            fresh = [s for s in due if (s.tenant, s.key) not in seen]
            batch: list[Materialisation] = []
            unreadable = []
            for schedule in fresh:
                seen.add((schedule.tenant, schedule.key))
                if schedule.trigger is None:
                    unreadable.append(schedule)
                    continue
                batch.append(self._plan(schedule, now, planned_to))
            written = self.store.materialise_many(batch, now)
            report.materialised += written.new
            report.skip(written.skipped)
            self._stop_invalid(unreadable, now, report)
            if len(due) < _SCHEDULE_BATCH or not fresh:
                return None
            if spent():
                return bound

    def _stop_invalid(self, unreadable: list[Schedule], now: datetime, report: TickReport) -> None:
        """Stop the schedules whose stored trigger no longer reads, after the batch's others are
        written; log each one this worker stopped (another may have stopped it first)."""
        if not unreadable:
            return
        reasons = {(s.tenant, s.key): s.status_reason for s in unreadable}
        jobs = {(s.tenant, s.key): s.job for s in unreadable}
        stopped = self.store.mark_invalid(
            [(s.tenant, s.key, f"invalid: {s.status_reason}") for s in unreadable], now
        )
        for tenant, key in stopped:
            report.invalid += 1
            job = jobs[(tenant, key)]
            report.invalid_by_job[job] = report.invalid_by_job.get(job, 0) + 1
            log.error(
                "oncely: schedule %r stopped: its stored trigger no longer reads (%s); every "
                "other schedule goes on. Save it again with a valid trigger to restart it",
                key,
                reasons[(tenant, key)],
            )

    def _plan(self, schedule: Schedule, now: datetime, until: datetime) -> Materialisation:
        job = self.jobs[schedule.job]
        assert schedule.trigger is not None
        assert schedule.next_run_at is not None
        decided = plan(schedule.trigger, schedule.next_run_at, job, now, ahead_to=until)
        newest = [p.instance.at for p in decided.planned if p.status == "pending" and
                  p.instance.at <= now]  # fmt: skip
        stale_before = None
        if newest and job.misfire != "all" and schedule.trigger.kind != "at":
            stale_before = newest[-1]
        return Materialisation(
            schedule.tenant,
            schedule.key,
            decided.planned,
            expected_next_run_at=schedule.next_run_at,
            next_run_at=decided.next_run_at,
            overlap=job.overlap,
            stale_before=stale_before,
            stale_reason=None if stale_before is None else superseded_by(stale_before, job),
        )

    def _run(self, report: TickReport) -> None:
        while True:
            taken = self.claim(self._batch)
            report.skip(taken.skipped)
            claims = self._hold_no_at_most_once_waiting(taken)
            if not claims:
                return
            started = time.monotonic()
            pending: list[Finished] = []
            for claimed in claims:
                claim = self._fresh_lease(claimed, self.jobs[claimed.job].lease, pending, report)
                if claim is None:
                    continue
                if any(f.claim.lease_expires_at < claim.lease_expires_at for f in pending):
                    # This handler may run until its own lease ends, past the leases of what
                    # ran before it: an unbooked success whose lease ran out meanwhile was
                    # taken over and ran twice (a one-off behind an 80-minute job).
                    self._book(pending, report)
                job = self.jobs[claim.job]
                run = self.executor.start(claim, job)
                result = run if isinstance(run, Finished) else self.executor.call(run, job)
                if isinstance(result, Finished):
                    pending.append(result)
                else:
                    report.count(result)
            self._book(pending, report)
            self.executor.tell_outcomes()
            self._batch = _next_batch(self._batch, len(claims), time.monotonic() - started)

    def _hold_no_at_most_once_waiting(self, claims: list[Claim]) -> list[Claim]:
        """``claims`` without the at_most_once ones that would wait for another handler; those
        are given back at once, for the next batch or another worker.

        Waiting behind a handler that outlasted their lease, they were abandoned by another
        worker's tick though they never ran: an at_most_once attempt is never made again.
        """
        waiting = [c for c in claims[1:] if self.jobs[c.job].delivery == "at_most_once"]
        if waiting:
            self.store.release(waiting, self.clock())
        return [c for c in claims if c not in waiting]

    def _book(self, pending: list[Finished], report: TickReport) -> None:
        booked = self.executor.book(pending)
        for _, outcome in booked:
            report.count(outcome)
        report.booked(booked)

    def _fresh_lease(
        self, claim: Claim, lease: timedelta, pending: list[Finished], report: TickReport
    ) -> Claim | None:
        """``claim`` with at least half its lease ahead, or None if it was taken over meanwhile.

        Claims are taken in batches and run one after another; without this, the last of a batch
        of slow handlers could start on a lease about to expire and run twice. Successes waiting
        to be booked are booked first, so none of them outlives its lease either.
        """
        now = self.clock()
        if claim.lease_expires_at - now >= lease / 2:
            return claim
        self._book(pending, report)
        until = now + lease
        if claim.occurrence_id not in self.store.extend_leases([(claim, until)]):
            return None
        return extended(claim, until)

    def close(self) -> None:
        self.bridge.close()
