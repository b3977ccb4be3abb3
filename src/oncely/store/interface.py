"""The one persistence interface, at the level of business operations."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from oncely.model import (
    Abandoned,
    Action,
    Attempt,
    Claim,
    Claims,
    CodeVersion,
    Failure,
    Lease,
    Materialisation,
    Materialised,
    Occurrence,
    OccurrenceStatus,
    Overlap,
    Planned,
    Reclaimed,
    Saving,
    Schedule,
    ScheduleOrigin,
    ScheduleStatus,
    Sweep,
    WorkerBeat,
)
from oncely.recurrence import Trigger


class Watch(ABC):
    """A subscription to the store's change notices, started by `Store.watch`."""

    @property
    @abstractmethod
    def alive(self) -> bool:
        """True while notices can arrive; False once closed, or once its connection failed."""

    @abstractmethod
    def close(self) -> None:
        """Stop watching within a second; ``on_change`` is not called again. Safe to repeat."""


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
        keyless: bool = False,
    ) -> Schedule:
        """Insert schedule (tenant, key), or replace what the one already there runs and when:
        `save_schedules` of one item."""
        item = Saving(tenant, key, job, trigger, payload, next_run_at, origin, occurrences, keyless)
        return self.save_schedules([item], now)[0]

    @abstractmethod
    def save_schedules(
        self, batch: Sequence[Saving], now: datetime, *, within: Any = None
    ) -> list[Schedule]:
        """Save each item of ``batch``, all in one transaction; return the schedules, in order.

        Each item inserts schedule (tenant, key), or replaces what the one already there runs
        and when. On conflict the row is updated in place: it keeps its identity, its paused flag
        and its history, and a removed schedule comes back. When the stored trigger equals the
        item's and the schedule is active, its next run is kept (saving the same schedule twice
        changes nothing but the payload); otherwise it becomes the item's ``next_run_at`` and the
        old trigger's pending occurrences are skipped with a reason: a changed trigger replaces
        the future and never replays the past. Status becomes ``active``, or ``ended`` when the
        next run is None. The item's ``occurrences`` are recorded only when the schedule is new
        or its future replaced: a one-off saved again with its trigger unchanged records nothing,
        so it stays done once its history is pruned. ``keyless``: a one-off deferred without a
        key, deleted by `prune` once finished. ``tenant=None`` is the no-tenant space, distinct
        from every named tenant. A batch holds each (tenant, key) once.

        The batch is written in chunks of `saving.SAVE_CHUNK` items, each statement taking its
        rows as one JSON parameter (PostgreSQL allows 65,535 parameters a statement). On
        PostgreSQL the existing rows are locked in (tenant, key) order, so two batches sharing
        keys never deadlock, and one NOTIFY is sent for the whole batch.

        ``within``: a connection of the caller's, in an open transaction on this store's
        database (`PostgresStore`: psycopg; `SqliteStore`: sqlite3 on the same file): the writes
        are made on it and never committed, so they commit or roll back with the caller's own.
        Raises `ConfigurationError` for a ``within`` on another database or in no transaction;
        `InvalidPayload`, `InvalidSchedule` (a one-off with ``guard_horizon`` moved before the
        history horizon, or a runtime save over a code-declared schedule's key) and
        `ConfigurationError` (a code-declared save over a runtime schedule's key), each with
        ``item`` set to the index of the item, nothing written; `StoreUnavailable`.
        """

    @abstractmethod
    def get_schedule(self, tenant: str | None, key: str, *, within: Any = None) -> Schedule:
        """Return schedule (tenant, key); raise `UnknownSchedule` if absent or removed.

        ``within`` (here and in `set_paused`, `remove_schedule`, `add_occurrences`): a caller's
        connection in an open transaction, as for `save_schedules`."""

    @abstractmethod
    def list_schedules(
        self,
        tenant: str | None,
        *,
        all_tenants: bool = False,
        job: str | None = None,
        status: ScheduleStatus | None = None,
        prefix: str | None = None,
        after: tuple[str | None, str] | None = None,
        limit: int | None = None,
    ) -> list[Schedule]:
        """Return the schedules of ``tenant`` (of every tenant with ``all_tenants``) by
        (tenant, key): those of ``job``, in ``status``, with keys starting with ``prefix`` (each
        None: any), after ``(tenant, key)`` ``after`` (None: from the first), ``limit`` at most
        (None: all). A page reads the (tenant, key) index from ``after`` on.

        Removed schedules are left out. A schedule whose stored trigger no longer reads is listed
        with status ``invalid`` and its reason, never raised.
        """

    @abstractmethod
    def code_schedule_keys(self) -> list[str]:
        """Return the keys of the code-declared schedules that are not removed."""

    @abstractmethod
    def set_paused(
        self,
        tenant: str | None,
        key: str,
        paused: bool,
        now: datetime,
        *,
        until: datetime | None = None,
        within: Any = None,
    ) -> Schedule:
        """Pause or resume schedule (tenant, key); raise `UnknownSchedule` if absent or removed.

        ``until`` (pausing only): the pause ends by itself then (`resume_ended_pauses`); None,
        and any resume, clears a pause's end: it lasts until resumed by hand."""

    @abstractmethod
    def resume_ended_pauses(self, now: datetime, actor: str, limit: int = 100) -> list[Action]:
        """Resume the schedules, not removed, whose pause ended (``paused_until`` at or before
        ``now``; NULL never ends), at most ``limit``, the earliest ended first, and record each
        resume as an `Action` by ``actor`` in the same transaction; return those actions. One
        another process is resuming at the same moment is left to it."""

    @abstractmethod
    def remove_schedule(
        self, tenant: str | None, key: str, now: datetime, *, within: Any = None
    ) -> Schedule:
        """Stop schedule (tenant, key) firing and keep it as history; raise `UnknownSchedule`.

        Its occurrences still waiting to run or to retry are recorded as skipped, with the reason;
        one running now finishes and is booked as usual.
        """

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
        item = Materialisation(tenant, key, planned, expected_next_run_at, next_run_at, overlap)
        return self.materialise_many([item], now).new

    @abstractmethod
    def materialise_many(self, batch: Sequence[Materialisation], now: datetime) -> Materialised:
        """Apply each item of ``batch`` as `materialise` does, all in one transaction.

        One commit for many schedules: a worker materialising a thousand every-second schedules
        spent most of each second on a commit per schedule. On PostgreSQL a schedule whose row
        another process holds locked (materialising it at this moment) is left to that process
        (SKIP LOCKED), instead of waiting for it to find the next run already moved. Returns how
        many occurrences were new, and one `Skipped` for each occurrence this call recorded as
        skipped: a new one planned skipped (misfire) or turned skipped by ``overlap``, and a
        pending one superseded by ``stale_before`` (misfire). Only rows this call wrote: of two
        processes materialising the same schedule only the one that moved its next run on
        writes, and an occurrence already recorded is left as it is and not returned. Round
        trips stay those of the writes themselves (RETURNING, or SQLite's change count). Raises
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
        within: Any = None,
    ) -> int:
        """Record ``planned`` for schedule (tenant, key) without moving its next run.

        For `App.trigger` and `App.backfill`. Each is inserted once; with ``rearm_skipped`` an
        occurrence already recorded as skipped becomes pending again, once. Returns how many were
        new or re-armed. Raises `UnknownSchedule` (absent or removed) and `StoreUnavailable`.
        """

    @abstractmethod
    def due_schedules(
        self,
        now: datetime,
        jobs: Collection[str],
        limit: int,
        *,
        after: datetime | None = None,
    ) -> list[Schedule]:
        """Return active, unpaused schedules of ``jobs`` whose next run is at or before ``now``
        (and, with ``after``, later than it).

        Earliest first, at most ``limit``. A schedule with no next run (NULL) is never due. One
        whose stored trigger no longer reads is returned with status ``invalid`` and no trigger.
        Payloads are not read (``payload`` is None): materialising never needs them.
        """

    @abstractmethod
    def mark_invalid(
        self, schedules: Sequence[tuple[str | None, str, str]], now: datetime
    ) -> list[tuple[str | None, str]]:
        """Stop each (tenant, key, reason) of ``schedules`` as ``invalid``, recording its next run
        as an invalid occurrence with the reason, all in one transaction; return the (tenant, key)
        of those this call stopped.

        Only these schedules stop; the occurrence row says why, so history answers "why didn't
        it fire?". A schedule already stopped (or gone) is left as it is and not returned: of
        workers that met the same bad rule at once, only the one that stopped it says so. One
        transaction for all: thousands of bad rules, one commit each, held up every schedule due
        with them for seconds.
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
        due_by: datetime | None = None,
        skip: Collection[str] = (),
    ) -> Claims:
        """Claim up to ``limit`` occurrences to run, each under a lease until ``now + lease``.

        Qualify: occurrences of ``jobs`` that are pending or retrying with ``run_after <= due_by``
        (``now`` when None or earlier: a claim taken a moment ahead of the time its occurrences
        come due, which the caller must not start before their ``Claim.run_after``; their
        ``started_at`` is recorded as the later of ``now`` and ``run_after``),
        and occurrences of ``reclaim`` jobs that are running with an expired lease (a NULL lease
        counts as expired) -- their worker was lost. Never those of a paused or removed schedule.
        For ``serial`` jobs (overlap other than ``allow``) at most one occurrence per schedule runs
        at a time: none is claimed while another runs under a live lease, and of several due the
        oldest goes first. For ``skip`` jobs (overlap ``skip``), an occurrence materialised ahead
        of its time (pending, from its schedule, written before it came due) that is due now
        while another of its schedule runs under a live lease is booked ``skipped`` with the
        overlap reason: when materialised, overlap could not yet be judged. Each claim
        increments the attempt count and takes a fence greater than every earlier one on its
        schedule. Two claimers never take the same occurrence (SKIP LOCKED on PostgreSQL, the
        write lock on SQLite). A claim whose stored payload does not decode carries an
        `Unreadable` payload, never an error: the caller fails that one. Returns the claims as
        `Claims`, whose ``skipped`` has one `Skipped` (overlap) for each occurrence this call
        booked skipped (not one another claimer skipped or started first). Raises
        `StoreUnavailable`.
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
    def extend_leases(self, leases: Sequence[tuple[Claim, datetime]]) -> set[int]:
        """Move each claim's lease to the time paired with it, in one statement; return the
        occurrence ids extended.

        Only rows still ``running`` with the claim's fence: one whose lease was taken over (or
        that was booked or given back meanwhile) is left alone and left out of the result: for
        its holder, the lease is lost. Raises `StoreUnavailable`.
        """

    @abstractmethod
    def book_success(self, claims: Sequence[Claim], now: datetime) -> list[Claim]:
        """Record each of ``claims`` as succeeded, reset their schedules' failure streaks, and
        return the ones booked, in one transaction.

        Conditional on each claim's fence and status ``running``: a second booking of the same
        attempt, or one whose lease was taken over, changes nothing and is left out of the
        result.
        """

    @abstractmethod
    def commit_success(self, claim: Claim, now: datetime, *, within: Any) -> bool:
        """Book ``claim``'s success as the last statement of ``within`` (a connection from
        `transaction`), conditional as `book_success` (failure streak reset too); return
        whether it was booked.

        The caller leaves the transaction block next: committing it when booked, rolling it
        back when not (the lease was taken over). A store may send the booking and the COMMIT
        in one round trip; when not booked it has then rolled the transaction back itself. No
        notice on ``oncely_outcomes`` goes with it: the caller sends one for many such
        bookings with `tell_outcomes`.
        """

    @abstractmethod
    def tell_outcomes(self) -> None:
        """Tell open dashboards that outcomes were booked (PostgreSQL: one notice on channel
        ``oncely_outcomes``, in a transaction of its own; nothing on SQLite), for what
        `commit_success` booked. Raises `StoreUnavailable`."""

    @abstractmethod
    def book_skipped(self, claim: Claim, now: datetime, reason: str) -> bool:
        """Record ``claim``'s occurrence as ``skipped`` with ``reason`` instead of running it,
        giving back the attempt its claim counted. Only while ``claim`` still holds it (running,
        same fence); returns whether it did. Raises `StoreUnavailable`."""

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
        and, when ``pause_after`` is not None and the count reaches it, the schedule is paused
        (`Failure.paused_now` when this call paused it, in the same statement: a schedule
        already paused is not paused again). Conditional on the fence like `book_success`: one
        attempt books one failure.
        """

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Any]:
        """A connection in one open transaction, for a transactional handler's own writes.

        Committed when the block ends, rolled back when it raises. On SQLite the transaction holds
        the database's write lock until it ends.
        """

    @abstractmethod
    def next_due_at(
        self, jobs: Collection[str] | None = None, *, after: datetime | None = None
    ) -> datetime | None:
        """Return when something of ``jobs`` (None: any job) next comes due: the earliest next
        run of an active, unpaused schedule, or the earliest ``run_after`` of a pending or
        retrying occurrence a claim could take (its schedule neither paused nor removed), or the
        earliest end of a pause (`set_paused` ``until``); None when there is none of these. With
        ``after``, only times later than it count.
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
    def attempts(
        self, tenant: str | None, key: str, scheduled_for: datetime
    ) -> list[Attempt] | None:
        """Return every attempt of schedule (tenant, key)'s occurrence at ``scheduled_for`` that
        is kept, first first; None when there is no such occurrence.

        The occurrence row holds its last attempt (running, or the one that ended it); each
        attempt before it that did not end it (a failure retried, a lost worker's attempt taken
        over or reclaimed, a failed one retried by hand) was kept by the booking, claim or sweep
        that ended it, up to `records.ATTEMPTS_KEPT` per occurrence. A pending or retrying
        occurrence lists only those before. Attempts booked by a version before migration 10
        were not kept: the list then starts later than 1. Removed schedules' occurrences count.
        """

    @abstractmethod
    def acquire_lease(self, name: str, owner: str, ttl: timedelta, now: datetime) -> Lease | None:
        """Take lease ``name`` for ``owner`` until ``now + ttl``; None while another holds it.

        Taken when nobody holds it or the holder's ``expires_at <= now``. Only expiry decides,
        never owner equality: an owner asking again for a lease it holds gets None (two threads of
        one process share an owner name). Each acquisition takes a token greater than every
        earlier one of that name. Of any number of callers racing, in any processes, at most one
        gets it (``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` on PostgreSQL, the write lock on
        SQLite). Raises `StoreUnavailable`.
        """

    @abstractmethod
    def renew_lease(self, lease: Lease, until: datetime) -> Lease | None:
        """Move ``lease``'s expiry to ``until`` and return it so; None when its token is no longer
        the name's current one (it ran out and was taken, or was released).

        A lease that ran out but that nobody took since is renewed: its token is still current,
        so nobody held the name in between.
        """

    @abstractmethod
    def release_lease(self, lease: Lease) -> bool:
        """Give ``lease`` up, so that the next `acquire_lease` of its name succeeds at once.

        Only with the name's current token: False, and nothing changed, when ``lease`` is stale,
        so an earlier holder's release never frees a newer holder's lease.
        """

    @abstractmethod
    def lease_holder(self, name: str, now: datetime) -> Lease | None:
        """The lease on ``name`` that has not expired at ``now``, if any."""

    @abstractmethod
    def see_code_version(
        self, fingerprint: str, now: datetime
    ) -> tuple[CodeVersion, CodeVersion | None]:
        """Record that a worker with these code declarations runs at ``now`` (first seen now if
        never seen); return it and the version applied last (None: none ever was)."""

    @abstractmethod
    def running(self, limit: int = 1000) -> list[Occurrence]:
        """Return every tenant's ``running`` occurrences (under a lease, held by ``worker``
        until ``lease_expires_at``), the soonest expiry first, at most ``limit``."""

    @abstractmethod
    def job_counts(self) -> dict[str, int]:
        """Return how many schedules (of every tenant, not removed) run each job, by job name;
        a job no schedule runs is not in it."""

    @abstractmethod
    def schedule_states(self) -> dict[tuple[str, str], int]:
        """Return how many schedules (of every tenant) wait for a person, by (job, state): state
        ``invalid`` (stopped: its stored trigger no longer reads), ``paused_failing`` (paused,
        with failed occurrences since its last success: what ``pause_after`` leaves, or a
        failing schedule paused by hand) or ``paused`` (any other pause). Removed and ended
        schedules are not counted; a pair with none is not in it. Reads a partial index of
        these schedules only, whatever the number of schedules. Raises `StoreUnavailable`."""

    @abstractmethod
    def retry_failed(
        self, tenant: str | None, key: str, scheduled_for: datetime, now: datetime
    ) -> bool:
        """Give the ``failed`` occurrence of schedule (tenant, key) at ``scheduled_for`` one more
        attempt: ``retrying`` from ``now``. Returns False, changing nothing, when there is no
        such occurrence or it is not failed (a second retry while the first waits)."""

    @abstractmethod
    def record_action(self, action: Action) -> None:
        """Record what a person did to a schedule by hand. Raises `StoreUnavailable`."""

    @abstractmethod
    def actions(self, tenant: str | None, key: str | None, limit: int = 50) -> list[Action]:
        """Return the recorded actions on schedule (tenant, key), or on every schedule of
        ``tenant`` when ``key`` is None (None tenant: no tenant's, not every tenant's), newest
        first (then the latest recorded), at most ``limit``."""

    @abstractmethod
    def code_versions(self, limit: int = 20) -> list[CodeVersion]:
        """Return the code versions workers have run, the one seen last first (then by
        fingerprint), at most ``limit``: when ``last_seen_at`` is old, no worker is running."""

    @abstractmethod
    def leases(self, limit: int = 1000) -> list[Lease]:
        """Return the named leases on record by name, at most ``limit``: held ones and expired
        ones not yet taken again (a lease released is gone). Locks and housekeeping both."""

    @abstractmethod
    def mark_code_applied(self, fingerprint: str, now: datetime) -> None:
        """Record that ``fingerprint``'s declarations were applied to the schedules at ``now``."""

    @abstractmethod
    def database_now(self) -> datetime | None:
        """The database server's clock, or None when the store has no server (SQLite), whose
        callers use their own. Locks take their times from here, so that instances whose clocks
        disagree still agree on when a lease expires."""

    @abstractmethod
    def beat(self, worker: WorkerBeat) -> None:
        """Record ``worker``'s heartbeat: its row is made, or updated (never moving
        ``heartbeat_at`` back, nor ``started_at`` at all). Raises `StoreUnavailable`."""

    @abstractmethod
    def forget_worker(self, name: str) -> None:
        """Delete the row of worker ``name`` (it stopped); none is no error."""

    @abstractmethod
    def forget_silent_workers(self, before: datetime) -> int:
        """Delete the rows of workers whose last heartbeat is before ``before`` (killed
        without stopping); return how many."""

    @abstractmethod
    def workers(self, limit: int = 100) -> list[WorkerBeat]:
        """Return the workers on record, latest heartbeat first, at most ``limit``."""

    @abstractmethod
    def record_sweep(self, sweep: Sweep) -> None:
        """Record one housekeeping pass. Raises `StoreUnavailable`."""

    @abstractmethod
    def sweeps(self, limit: int = 20) -> list[Sweep]:
        """Return the recorded sweeps, newest ``finished_at`` first (then latest recorded), at
        most ``limit``."""

    @abstractmethod
    def history_horizon(self) -> datetime | None:
        """Return the time before which `prune` may have deleted history (None: never pruned).

        Every occurrence ever written for a time at or after it is still stored, so a
        de-duplication that reads history is exact from it on, and only from it on.
        """

    @abstractmethod
    def prepare_history(self, now: datetime) -> None:
        """Make ready what writing the next days' occurrences needs, ahead of time: on
        PostgreSQL the partitions of today and the days after it (a write makes its day's
        partition itself, in a transaction of its own, if none was made); nothing on SQLite."""

    @abstractmethod
    def prune(
        self, before: datetime, limit: int, *, by_status: Mapping[str, datetime] | None = None
    ) -> int:
        """Delete up to ``limit`` finished occurrences, and the sweeps, that finished before
        ``before``; return how many occurrences went (the caller repeats while it gets ``limit``).

        Qualify: occurrences in a final status (succeeded, failed, skipped, abandoned, invalid)
        scheduled before ``before`` and with ``finished_at < before`` (NULL arm: one that never
        ran, skipped or invalid, has no ``finished_at``). An occurrence whose status ``by_status``
        names qualifies before that time instead (failures kept longer, say). The history horizon
        is raised to ``before``, or the latest time of ``by_status`` if later. Pending, running
        and retrying occurrences are never deleted, whatever their
        age. Schedules are kept (a removed one keeps its row), except finished keyless one-offs
        updated before ``before`` with no occurrence left. Code versions are kept: when a
        version was first seen tells an old release from a new one, and an old release started
        after its row was pruned counted as the newest (the cost is a row of a few dozen bytes
        per version ever deployed). Every sweep with ``finished_at < before`` goes, and every
        action (`record_action`) with ``at < before``. The oldest scheduled go first, read from a
        partial index of finished occurrences: a call reads about ``limit`` rows, whatever the
        history's size (the index costs one entry per booking of a final outcome).

        Pruning leaves what the engine decides unchanged: the consecutive-failure count behind
        ``pause_after`` is a counter on the schedule, not a count of history; overlap checks and
        serial claims read only occurrences in progress; misfire reads the schedule's trigger and
        next run; explain's upcoming and running come from the schedule and running rows (its
        recent outcomes simply reach back less far). A pruned row was what made its (schedule,
        time) happen once; the horizon stands in for it: a backfill of a range that starts
        before the horizon, and a defer that moves a timer (or an unscheduled timer's key) to a
        time before it, raise `InvalidSchedule`, and a defer saved again with the same key and
        time changes nothing (docs/operations/retention.md). Raises `StoreUnavailable`.

        On PostgreSQL history goes by whole UTC days, and without deleting rows: the partition of
        each day that ends by the start of ``before``'s day is detached and dropped, with the
        attempts kept of its occurrences, once it holds nothing pending, running or retrying;
        the count returned for it is the statistics' estimate of its rows (counted, for a day
        never analyzed). A day that still holds such occurrences keeps its partition, and its
        finished rows are deleted as above, up to ``limit``. The horizon is raised to the start
        of ``before``'s day.
        """

    @abstractmethod
    def reclaim_expired(self, now: datetime, retries: Mapping[str, int]) -> list[Reclaimed]:
        """Give back the occurrences of ``retries``' jobs whose worker was lost; return them.

        ``retries`` maps a job name to its budget (attempts in all). Qualify: occurrences
        ``running`` with ``lease_expires_at <= now`` (a NULL lease counts as expired) of the jobs
        named. One with attempts left (``attempts < budget``) becomes ``retrying`` from ``now``,
        with the error "worker <owner> was lost during attempt N (lease expired)"; otherwise it
        is ``failed``, the error adding that this was the last of R attempts, and its schedule's
        consecutive-failure count goes up (``pause_after`` itself is the engine's to apply). One
        of a removed schedule is ``failed``: nothing would run it again. Either way the lease is
        cleared and ``finished_at`` is ``now``.

        Each change is conditional on the row being still ``running`` with the fence read and
        its lease expired: of this and a `claim_due` reclaiming the same row at the same moment,
        exactly one wins. At_most_once jobs are not for this: see `abandon_expired`. Raises
        `StoreUnavailable`.
        """

    @abstractmethod
    def fail_orphaned(
        self, now: datetime, jobs: Collection[str], lost_before: datetime
    ) -> list[Abandoned]:
        """Fail the ``running`` occurrences of jobs not in ``jobs`` whose lease expired before
        ``lost_before``, with an error saying that no running worker declares their job; return
        them. Raises `StoreUnavailable`."""

    @abstractmethod
    def release(self, claims: Sequence[Claim], now: datetime) -> int:
        """Give back ``claims`` whose attempts never started (a worker stopping); return how
        many were given back.

        Only rows still ``running`` with the claim's fence: one already booked, or whose lease
        was taken over, is left alone. The attempt is undone: attempts goes down by one, status
        back to ``pending`` (no attempt made before) or ``retrying``, lease cleared, ``run_after``
        unchanged (one claimed ahead of its time stays not yet due). ``started_at``,
        ``finished_at`` and ``worker`` become NULL, as on an occurrence never claimed: the claim
        overwrote the previous attempt's, so a released ``retrying`` one shows none (its error
        stays). The next claim at or after ``run_after``, by any worker, takes them with the
        same attempt number. Raises `StoreUnavailable`.
        """

    @abstractmethod
    def mark_left_running(self, claims: Sequence[Claim], reason: str) -> int:
        """Record ``reason`` on ``claims`` whose attempts a stopping worker leaves running; return
        how many were marked.

        Only rows still ``running`` with the claim's fence: one already booked, or whose lease
        was taken over, is left alone. Nothing else changes: the lease expires on its own and
        the occurrence is then taken over like any lost worker's (reclaimed, or abandoned for
        at_most_once), so history tells a worker that stopped at its drain timeout from one
        that crashed. Raises `StoreUnavailable`.
        """

    @abstractmethod
    def watch(self, on_change: Callable[[], None], *, outcomes: bool = False) -> Watch | None:
        """Call ``on_change()`` whenever something may have come due sooner, and with
        ``outcomes`` whenever an outcome is booked too; None on SQLite.

        PostgreSQL: every operation that makes something due sooner (`save_schedule`,
        `add_occurrences`, `set_paused` resuming or given an end, `resume_ended_pauses`,
        `release`, `reclaim_expired` retrying, `book_failure` retrying) commits a NOTIFY on
        channel ``oncely`` in its own transaction; claims never do. Bookings (`book_success`,
        `book_skipped`, `book_failure` failing, `tell_outcomes`) commit one on channel
        ``oncely_outcomes`` instead, one per call, which only a watch with ``outcomes`` (the
        dashboard's) hears:
        workers are not woken by every outcome. The
        watch LISTENs on a connection of its own (not the pool's), from a daemon thread blocked in
        psycopg's ``notifies()``, never on a timer, and calls ``on_change()`` from that thread,
        once per notice; an exception from it is logged and the watch goes on. When the
        connection fails the watch logs one WARNING (logger ``oncely``), stops being alive,
        calls ``on_change()`` once (notices may have been missed) and ends: starting another is
        the caller's decision. SQLite has no channel between processes, so there the caller's
        own wait for `next_due_at` is all there is. Raises `StoreUnavailable` when the
        connection cannot be opened.
        """

    @abstractmethod
    def reserve(self, users: int) -> None:
        """Make room for ``users`` threads using the store at once (a worker's handlers, its
        loop and heartbeats); never shrinks. Without it, transactional handlers holding every
        pooled connection starved the worker's own loop until the pool timed out."""

    @abstractmethod
    def close(self) -> None:
        """Release connections; the store is not used afterwards."""
