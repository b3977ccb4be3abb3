"""The store's operations written once for both dialects, over `Dialect`'s hooks.

What must differ (claims, materialising, saving's statements, transactions, the wake-up
channel, how a time is written) is left to `store/sqlite.py` and `store/postgres.py`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from oncely.errors import OncelyError
from oncely.model import (
    Action,
    Attempt,
    CodeVersion,
    Lease,
    Occurrence,
    OccurrenceStatus,
    Planned,
    Saving,
    Schedule,
    ScheduleStatus,
    Sweep,
    WorkerBeat,
)
from oncely.recurrence import At
from oncely.store import housekeeping, records, saving
from oncely.store.bookings import Bookings
from oncely.store.dialect import Row
from oncely.store.records import known, tenant_column, unknown_schedule
from oncely.store.saving import occurrence_params

#: One item of a chunk of `Store.save_schedules`: (index in the batch, item, its params).
Item = tuple[int, Saving, dict[str, Any]]
#: What `SqlStore._decide` decided for a chunk: the schedule rows, the occurrences planned with
#: them (with their schedule's row), the ids of schedules whose pending future is replaced.
Decision = tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Planned]], list[int]]

# The lower bound of `due_schedules` when none is asked: before any stored time.
BEFORE_ANY = datetime(1, 1, 1, tzinfo=UTC)


class SqlStore(Bookings):
    """A store in one SQL database; a dialect subclass says how to reach and bind it."""

    def schema_version(self) -> int:
        with self._reading() as connection:
            exists = self._row(connection, "migrations_table_exists", {})
            if exists is None or exists["count"] == 0:
                return 0
            rows = self._rows(connection, "applied_versions", {})
        return max((row["version"] for row in rows), default=0)

    def _decide(
        self, chunk: Sequence[Item], existing: dict[tuple[str, str], Row], horizon: datetime | None
    ) -> Decision:
        """What saving ``chunk`` over the ``existing`` rows writes (see `Decision`). Raises the
        item's error with its index (``.item``)."""
        rows: list[dict[str, Any]] = []
        occurrences: list[tuple[dict[str, Any], Planned]] = []
        replaced_ids: list[int] = []
        for index, item, item_params in chunk:
            found = existing.get((item_params["tenant"], item_params["key"]))
            try:
                decided, replaced = saving.save_params(found, item_params)
                if item.guard_horizon and isinstance(item.trigger, At):
                    saving.refuse_before_horizon(found, decided, item.trigger.when, horizon)
            except OncelyError as exc:
                exc.item = index
                raise
            if replaced:
                assert found is not None
                replaced_ids.append(found["id"])
            if item.occurrences and (found is None or replaced):
                occurrences += [(decided, p) for p in item.occurrences]
            rows.append(decided)
        return rows, occurrences, replaced_ids

    def get_schedule(self, tenant: str | None, key: str, *, within: Any = None) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key}
        with self._reading() if within is None else self._writing(within) as connection:
            found = self._row(connection, "select_schedule", params)
        return known(None if found is None else records.schedule(found), tenant, key)

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
        params = records.listing_params(tenant, all_tenants, job, status, prefix, after, limit)
        with self._reading() as connection:
            rows = self._rows(connection, "select_schedules", params)
        return [records.schedule(row) for row in rows]

    def code_schedule_keys(self) -> list[str]:
        with self._reading() as connection:
            rows = self._rows(connection, "code_schedule_keys", {"tenant": tenant_column(None)})
        return [row["key"] for row in rows]

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
        params = {
            "tenant": tenant_column(tenant), "key": key, "paused": paused, "now": now,
            "until": until if paused else None,
        }  # fmt: skip
        with self._writing(within) as connection:
            found = self._row(connection, "set_paused", params)
            # A pause's end is a wake-up time too: a worker asleep past it would resume late.
            if found is not None and (not paused or until is not None):
                self._notify(connection)
        return known(None if found is None else records.schedule(found), tenant, key)

    def resume_ended_pauses(self, now: datetime, actor: str, limit: int = 100) -> list[Action]:
        with self._writing() as connection:
            ended = self._rows(connection, "lock_ended_pauses", {"now": now, "limit": limit})
            if not ended:
                return []
            resumed = [records.pause_ended(row, now, actor) for row in ended]
            self._changed_each(
                connection, "end_pause", [{"id": row["id"], "now": now} for row in ended]
            )
            self._changed_each(
                connection, "insert_action", [records.action_params(a) for a in resumed]
            )
            self._notify(connection)
        return resumed

    def remove_schedule(
        self, tenant: str | None, key: str, now: datetime, *, within: Any = None
    ) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key, "now": now}
        with self._writing(within) as connection:
            # The schedule before its occurrences, as save_schedules locks them: the other order
            # deadlocked a removal with a concurrent save of the same key.
            self._rows(connection, "lock_schedule", params)
            self._changed(connection, "skip_waiting", {**params, "reason": saving.REMOVED})
            found = self._row(connection, "remove_schedule", params)
        return known(None if found is None else records.schedule(found), tenant, key)

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
        def write() -> int:
            return self._add_occurrences(tenant, key, planned, now, rearm_skipped, within)

        return self._inserting(write, within)

    def _add_occurrences(
        self,
        tenant: str | None,
        key: str,
        planned: Sequence[Planned],
        now: datetime,
        rearm_skipped: bool,
        within: Any,
    ) -> int:
        stored_tenant = tenant_column(tenant)
        self._before_inserting(p.instance.at for p in planned)
        with self._writing(within) as connection:
            found = self._row(connection, "schedule_id", {"tenant": stored_tenant, "key": key})
            if found is None:
                raise unknown_schedule(tenant, key)
            schedule_id = found["id"]
            if not planned:
                return 0
            rows = [occurrence_params(schedule_id, stored_tenant, p, now) for p in planned]
            added = self._changed_each(connection, "insert_occurrence", rows)
            if rearm_skipped:
                rearm = [
                    {"schedule_id": schedule_id, "scheduled_for": p.instance.at, "now": now}
                    for p in planned
                ]
                added += self._changed_each(connection, "rearm_skipped", rearm)
            if added > 0:
                self._notify(connection)
        return max(added, 0)

    def due_schedules(
        self,
        now: datetime,
        jobs: Collection[str],
        limit: int,
        *,
        after: datetime | None = None,
    ) -> list[Schedule]:
        params = {
            "now": now,
            "after": BEFORE_ANY if after is None else after,
            "jobs": self._texts(sorted(jobs)),
            "limit": limit,
        }
        with self._reading() as connection:
            rows = self._rows(connection, "due_schedules", params)
        return [records.schedule(row) for row in rows]

    def next_due_at(
        self, jobs: Collection[str] | None = None, *, after: datetime | None = None
    ) -> datetime | None:
        params = {"jobs": None if jobs is None else self._texts(sorted(jobs)), "after": after}
        with self._reading() as connection:
            schedule = self._row(connection, "next_schedule_due", params)
            occurrence = self._row(connection, "next_occurrence_due", params)
        due = [
            row["due"].astimezone(UTC)
            for row in (schedule, occurrence)
            if row is not None and row["due"] is not None
        ]
        return min(due, default=None)

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
        params = {
            "tenant": tenant_column(tenant),
            "all_tenants": all_tenants,
            "key": key,
            "since": since,
            "until": until,
            "status": status,
            "limit": limit,
        }
        with self._reading() as connection:
            name = "select_history" if key is None else "select_history_of_key"
            rows = self._rows(connection, name, params)
        return [records.occurrence(row) for row in rows]

    def running(self, limit: int = 1000) -> list[Occurrence]:
        with self._reading() as connection:
            rows = self._rows(connection, "select_running", {"limit": limit})
        return [records.occurrence(row) for row in rows]

    def retry_failed(
        self, tenant: str | None, key: str, scheduled_for: datetime, now: datetime
    ) -> bool:
        params = {"tenant": tenant_column(tenant), "key": key, "scheduled_for": scheduled_for}
        retry = {**params, "now": now, "kept": records.ATTEMPTS_KEPT}
        with self._writing() as connection:
            found = self._row(connection, "retry_failed", retry)
            if found is not None:
                self._keep_attempt(connection, found["id"], "failed")
                self._notify(connection)
        return found is not None

    def attempts(
        self, tenant: str | None, key: str, scheduled_for: datetime
    ) -> list[Attempt] | None:
        params = {"tenant": tenant_column(tenant), "key": key, "scheduled_for": scheduled_for}
        with self._reading() as connection:
            found = self._row(connection, "select_occurrence", params)
            if found is None:
                return None
            kept = self._rows(connection, "select_attempts", {"id": found["id"]})
        return records.attempts(found, kept)

    def job_counts(self) -> dict[str, int]:
        with self._reading() as connection:
            rows = self._rows(connection, "job_counts", {})
        return {row["job"]: row["schedules"] for row in rows}

    def schedule_states(self) -> dict[tuple[str, str], int]:
        with self._reading() as connection:
            rows = self._rows(connection, "schedule_states", {})
        return {(row["job"], row["state"]): row["schedules"] for row in rows}

    def renew_lease(self, lease: Lease, until: datetime) -> Lease | None:
        params = {**housekeeping.lease_params(lease), "until": until}
        with self._writing() as connection:
            found = self._row(connection, "renew_lease", params)
        return None if found is None else housekeeping.lease(found)

    def release_lease(self, lease: Lease) -> bool:
        with self._writing() as connection:
            released = self._row(connection, "release_lease", housekeeping.lease_params(lease))
        return released is not None

    def lease_holder(self, name: str, now: datetime) -> Lease | None:
        with self._reading() as connection:
            found = self._row(connection, "lease_holder", {"name": name, "now": now})
        return None if found is None else housekeeping.lease(found)

    def leases(self, limit: int = 1000) -> list[Lease]:
        params = {"limit": limit, "released": housekeeping.RELEASED}
        with self._reading() as connection:
            rows = self._rows(connection, "list_leases", params)
        return [housekeeping.lease(row) for row in rows]

    def see_code_version(
        self, fingerprint: str, now: datetime
    ) -> tuple[CodeVersion, CodeVersion | None]:
        params = {"fingerprint": fingerprint, "now": now}
        with self._writing() as connection:
            mine = self._row(connection, "see_code_version", params)
            applied = self._row(connection, "applied_code_version", {})
        assert mine is not None
        return CodeVersion(**mine), None if applied is None else CodeVersion(**applied)

    def mark_code_applied(self, fingerprint: str, now: datetime) -> None:
        with self._writing() as connection:
            params = {"fingerprint": fingerprint, "now": now}
            self._changed(connection, "mark_code_applied", params)

    def code_versions(self, limit: int = 20) -> list[CodeVersion]:
        with self._reading() as connection:
            rows = self._rows(connection, "list_code_versions", {"limit": limit})
        return [CodeVersion(**row) for row in rows]

    def beat(self, worker: WorkerBeat) -> None:
        with self._writing() as connection:
            self._changed(connection, "beat_worker", asdict(worker))

    def forget_worker(self, name: str) -> None:
        with self._writing() as connection:
            self._changed(connection, "forget_worker", {"name": name})

    def forget_silent_workers(self, before: datetime) -> int:
        with self._writing() as connection:
            return max(self._changed(connection, "forget_silent_workers", {"before": before}), 0)

    def workers(self, limit: int = 100) -> list[WorkerBeat]:
        with self._reading() as connection:
            rows = self._rows(connection, "select_workers", {"limit": limit})
        return [records.worker(row) for row in rows]

    def record_sweep(self, sweep: Sweep) -> None:
        with self._writing() as connection:
            self._changed(connection, "insert_sweep", housekeeping.sweep_params(sweep))

    def sweeps(self, limit: int = 20) -> list[Sweep]:
        with self._reading() as connection:
            rows = self._rows(connection, "select_sweeps", {"limit": limit})
        return [housekeeping.sweep(row) for row in rows]

    def record_action(self, action: Action) -> None:
        with self._writing() as connection:
            self._changed(connection, "insert_action", records.action_params(action))

    def actions(self, tenant: str | None, key: str | None, limit: int = 50) -> list[Action]:
        params = {"tenant": tenant_column(tenant), "key": key, "limit": limit}
        with self._reading() as connection:
            rows = self._rows(connection, "select_actions", params)
        return [records.action(row) for row in rows]

    def prepare_history(self, now: datetime) -> None:
        """Nothing: a store without partitions has nothing to make ahead."""

    def history_horizon(self) -> datetime | None:
        with self._reading() as connection:
            row = self._row(connection, "history_horizon", {})
        return None if row is None else row["before"].astimezone(UTC)
