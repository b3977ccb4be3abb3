"""The one persistence interface, at the level of business operations."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from oncely.model import Occurrence, OccurrenceStatus, Planned, Schedule, ScheduleOrigin
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
    ) -> Schedule:
        """Insert schedule (tenant, key), or replace what the one already there runs and when.

        On conflict the row is updated in place: it keeps its identity, its paused flag and its
        history, and a removed schedule comes back. Its status becomes ``active``, or ``ended``
        when ``next_run_at`` is None. ``tenant=None`` is the no-tenant space, distinct from every
        named tenant. Raises `InvalidPayload` (nothing is written) and `StoreUnavailable`.
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
    def set_paused(self, tenant: str | None, key: str, paused: bool, now: datetime) -> Schedule:
        """Pause or resume schedule (tenant, key); raise `UnknownSchedule` if absent or removed."""

    @abstractmethod
    def remove_schedule(self, tenant: str | None, key: str, now: datetime) -> Schedule:
        """Stop schedule (tenant, key) firing and keep it as history; raise `UnknownSchedule`."""

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
    ) -> int:
        """Record ``planned`` occurrences and move the schedule's next run on, in one transaction.

        Only when the schedule (tenant, key) is active and its ``next_run_at`` still is
        ``expected_next_run_at`` (None matching None): otherwise another process got there first,
        nothing is written, and 0 is returned. Each occurrence is inserted once: one already
        recorded for the same (schedule, time) is left as it is. ``next_run_at=None`` ends the
        schedule. Returns how many occurrences were new. Raises `StoreUnavailable`.
        """

    @abstractmethod
    def next_due_at(self) -> datetime | None:
        """Return the earliest next run of an active, unpaused schedule; None when there is none."""

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
    ) -> list[Occurrence]:
        """Return ``tenant``'s occurrences, newest scheduled time first, at most ``limit``.

        Each filter left as None matches everything (never "is NULL"): ``key``, scheduled time in
        [``since``, ``until``), ``status``. Removed schedules' occurrences are included: they are
        the record of what happened.
        """

    @abstractmethod
    def close(self) -> None:
        """Release connections; the store is not used afterwards."""
