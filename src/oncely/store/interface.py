"""The one persistence interface, at the level of business operations."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from oncely.model import (
    Abandoned,
    Claim,
    Failure,
    Occurrence,
    OccurrenceStatus,
    Overlap,
    Planned,
    Schedule,
    ScheduleOrigin,
)
from oncely.recurrence import Trigger


class Store(ABC):
    """Where schedules, occurrences and leases live.

    Two implementations, one per dialect: `SqliteStore` and `PostgresStore`. Every method that
    depends on the time takes it as ``now``; driver errors come out as `StoreUnavailable` (the
    store cannot be reached) and never as the driver's own exceptions.
    """

    dialect: str

    @abstractmethod
    def migrate(self, now: datetime) -> list[int]:
        """Apply the migrations this database has not seen; return the versions applied.

        Safe when several processes start together: they are lined up (an advisory lock on
        PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite) and each version is applied exactly once, in
        the same transaction that records it. Raises `StoreUnavailable`.
        """

    @abstractmethod
    def schema_version(self) -> int:
        """Return the newest migration applied, 0 for a database oncely has never touched."""

    @abstractmethod
    def save_schedule(
        self,
        *,
        tenant: str | None,
        key: str,
        job: str,
        origin: ScheduleOrigin,
        trigger: Trigger,
        payload: Any,
        next_run_at: datetime | None,
        now: datetime,
        occurrences: Sequence[Planned] = (),
    ) -> Schedule:
        """Insert schedule (tenant, key), or replace what the one already there runs and when.

        On conflict the row is updated in place: it keeps its identity, its paused flag and its
        history, and a removed schedule comes back. When the stored trigger equals ``trigger`` and
        the schedule is active, its next run is kept (saving the same schedule twice changes
        nothing but the payload); otherwise it becomes ``next_run_at`` and the old trigger's
        pending occurrences are skipped with a reason: a changed trigger replaces the future and
        never replays the past. Status becomes ``active``, or ``ended`` when the next run is None.
        ``occurrences`` are recorded in the same transaction (a deferred one-off's single run).
        ``tenant=None`` is the no-tenant space, distinct from every named tenant. Raises
        `InvalidPayload` (nothing is written) and `StoreUnavailable`.
        """

    @abstractmethod
    def get_schedule(self, tenant: str | None, key: str) -> Schedule:
        """Return schedule (tenant, key); raise `UnknownSchedule` if absent or removed."""

    @abstractmethod
    def list_schedules(self, tenant: str | None, *, all_tenants: bool = False) -> list[Schedule]:
        """Return the schedules of ``tenant`` (of every tenant with ``all_tenants``) by key.

        Removed schedules are left out. A schedule whose stored trigger no longer reads is listed
        with status ``invalid`` and its reason, never raised.
        """

    @abstractmethod
    def code_schedule_keys(self) -> list[str]:
        """Return the keys of the code-declared schedules that are not removed."""

    @abstractmethod
    def set_paused(self, tenant: str | None, key: str, paused: bool, now: datetime) -> Schedule:
        """Pause or resume schedule (tenant, key); raise `UnknownSchedule` if absent or removed."""

    @abstractmethod
    def remove_schedule(self, tenant: str | None, key: str, now: datetime) -> Schedule:
        """Stop schedule (tenant, key) firing and keep it as history; raise `UnknownSchedule`.

        Its occurrences still waiting to run or to retry are recorded as skipped, with the reason;
        one running now finishes and is booked as usual.
        """

    @abstractmethod
    def materialise(
        self,
        tenant: str | None,
        key: str,
        planned: Sequence[Planned],
        *,
        expected_next_run_at: datetime | None,
        next_run_at: datetime | None,
        now: datetime,
        overlap: Overlap = "allow",
    ) -> int:
        """Record ``planned`` occurrences and move the schedule's next run on, in one transaction.

        Only when the schedule (tenant, key) is active and its ``next_run_at`` still is
        ``expected_next_run_at`` (None matching None): otherwise another process got there first,
        nothing is written, and 0 is returned. Each occurrence is inserted once: one already
        recorded for the same (schedule, time) is left as it is. ``next_run_at=None`` ends the
        schedule. ``overlap`` compares with the occurrences already stored and still in progress
        (pending, running or retrying): under ``skip`` any of them turns the planned pending ones
        into skipped ones with the reason; under ``buffer_one`` so does one already waiting while
        another runs; ``allow`` changes nothing. Returns how many occurrences were new. Raises
        `StoreUnavailable`.
        """

    @abstractmethod
    def add_occurrences(
        self,
        tenant: str | None,
        key: str,
        planned: Sequence[Planned],
        *,
        now: datetime,
        rearm_skipped: bool = False,
    ) -> int:
        """Record ``planned`` for schedule (tenant, key) without moving its next run.

        For `App.trigger` and `App.backfill`. Each is inserted once; with ``rearm_skipped`` an
        occurrence already recorded as skipped becomes pending again, once. Returns how many were
        new or re-armed. Raises `UnknownSchedule` (absent or removed) and `StoreUnavailable`.
        """

    @abstractmethod
    def due_schedules(self, now: datetime, jobs: Collection[str], limit: int) -> list[Schedule]:
        """Return active, unpaused schedules of ``jobs`` whose next run is at or before ``now``.

        Earliest first, at most ``limit``. A schedule with no next run (NULL) is never due. One
        whose stored trigger no longer reads is returned with status ``invalid`` and no trigger.
        """

    @abstractmethod
    def mark_invalid(self, tenant: str | None, key: str, reason: str, now: datetime) -> None:
        """Stop schedule (tenant, key) as ``invalid`` and record its next run as an invalid one.

        Only this schedule stops; the occurrence row says why, so history answers "why didn't it
        fire?". A schedule already stopped is left as it is.
        """

    @abstractmethod
    def claim_due(
        self,
        *,
        owner: str,
        lease: timedelta,
        limit: int,
        now: datetime,
        jobs: Collection[str],
        reclaim: Collection[str],
        serial: Collection[str],
    ) -> list[Claim]:
        """Claim up to ``limit`` occurrences to run now, each under a lease until ``now + lease``.

        Qualify: occurrences of ``jobs`` that are pending or retrying with ``run_after <= now``,
        and occurrences of ``reclaim`` jobs that are running with an expired lease (a NULL lease
        counts as expired) -- their worker was lost. Never those of a paused or removed schedule.
        For ``serial`` jobs (overlap other than ``allow``) at most one occurrence per schedule runs
        at a time: none is claimed while another runs under a live lease, and of several due the
        oldest goes first. Each claim increments the attempt count and takes a fence greater than
        every earlier one on its schedule. Two claimers never take the same occurrence (SKIP
        LOCKED on PostgreSQL, the write lock on SQLite). Raises `StoreUnavailable`.
        """

    @abstractmethod
    def abandon_expired(
        self, *, now: datetime, jobs: Collection[str], reason: str
    ) -> list[Abandoned]:
        """Mark running occurrences of ``jobs`` whose lease expired (NULL counts) ``abandoned``.

        For at_most_once jobs: the call may have had its effect, so it is never made again.
        Returns what was abandoned, for the caller to report loudly.
        """

    @abstractmethod
    def extend(self, claim: Claim, until: datetime) -> bool:
        """Move ``claim``'s lease to ``until``; False when the lease was taken over (lease lost)."""

    @abstractmethod
    def book_success(
        self, claims: Sequence[Claim], now: datetime, *, within: Any = None
    ) -> list[Claim]:
        """Record each of ``claims`` as succeeded, reset their schedules' failure streaks, and
        return the ones booked, in one transaction.

        Conditional on each claim's fence and status ``running``: a second booking of the same
        attempt, or one whose lease was taken over, changes nothing and is left out of the
        result. ``within`` is a connection from `transaction`: the booking commits, or rolls
        back, with it.
        """

    @abstractmethod
    def book_failure(
        self,
        claim: Claim,
        now: datetime,
        *,
        error: str,
        retry_at: datetime | None,
        pause_after: int | None,
    ) -> Failure:
        """Record ``claim``'s attempt as failed: ``retrying`` from ``retry_at``, or ``failed``.

        ``retry_at=None`` makes the failure final: the schedule's consecutive-failure count goes up
        and, when ``pause_after`` is not None and the count reaches it, the schedule is paused.
        Conditional on the fence like `book_success`: one attempt books one failure.
        """

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Any]:
        """A connection in one open transaction, for a transactional handler's own writes.

        Committed when the block ends, rolled back when it raises. On SQLite the transaction holds
        the database's write lock until it ends.
        """

    @abstractmethod
    def next_due_at(self) -> datetime | None:
        """Return when something next comes due: the earliest next run of an active, unpaused
        schedule or the earliest ``run_after`` of a pending or retrying occurrence; None when
        there is neither.
        """

    @abstractmethod
    def history(
        self,
        tenant: str | None,
        *,
        key: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        status: OccurrenceStatus | None = None,
        limit: int = 100,
        all_tenants: bool = False,
    ) -> list[Occurrence]:
        """Return ``tenant``'s (every tenant's) occurrences, newest first, at most ``limit``.

        Each filter left as None matches everything (never "is NULL"): ``key``, scheduled time in
        [``since``, ``until``), ``status``. Removed schedules' occurrences are included: they are
        the record of what happened.
        """

    @abstractmethod
    def close(self) -> None:
        """Release connections; the store is not used afterwards."""
