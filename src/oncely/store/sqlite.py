"""The embedded store: SQLite from the standard library, in WAL mode."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from oncely.errors import StoreUnavailable
from oncely.model import Occurrence, OccurrenceStatus, Planned, Schedule, ScheduleOrigin
from oncely.recurrence import Trigger
from oncely.store import records
from oncely.store.interface import Store
from oncely.store.queries import migrations, queries
from oncely.store.records import known, occurrence_params, schedule_params, tenant_column

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_BUSY_TIMEOUT_S = 30.0


def to_micros(t: datetime) -> int:
    """Aware ``t`` as integer microseconds since the epoch (the SQLite time column type)."""
    return (t - _EPOCH) // timedelta(microseconds=1)


def from_micros(value: int) -> datetime:
    """The aware UTC datetime of a time column."""
    return _EPOCH + timedelta(microseconds=value)


def _micros_or_none(t: datetime | None) -> int | None:
    return None if t is None else to_micros(t)


def _micros_or_none_back(value: int | None) -> datetime | None:
    return None if value is None else from_micros(value)


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (sqlite3.executescript would COMMIT first)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending.strip()
            pending = ""
    if pending.strip() and not all(
        part.strip().startswith("--") or not part.strip() for part in pending.splitlines()
    ):
        raise ValueError(f"unterminated statement in migration: {pending.strip()[:80]!r}")


def _use_wal(connection: sqlite3.Connection) -> None:
    """Switch the file to WAL, waiting out another connection doing the same.

    Switching a new file to WAL needs it to itself, and SQLite answers "database is locked" at
    once rather than through the busy timeout: without this wait, the second of two processes
    starting on a new file failed.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    delay = 0.005
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


class SqliteStore(Store):
    """A store in one SQLite file; any number of processes on one machine may share it."""

    dialect = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self._sql = queries("sqlite")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            connection = sqlite3.connect(
                self.path, isolation_level=None, timeout=_BUSY_TIMEOUT_S, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        try:
            _use_wal(connection)
            connection.execute("PRAGMA foreign_keys = ON")
            yield connection
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"SQLite database {self.path!r}: {exc}") from exc
        finally:
            connection.close()

    def migrate(self, now: datetime) -> list[int]:
        applied: list[int] = []
        with self._connect() as connection:
            connection.execute(self._sql["lock_migrations"])
            try:
                connection.execute(self._sql["create_migrations_table"])
                seen = {row[0] for row in connection.execute(self._sql["applied_versions"])}
                for migration in migrations("sqlite"):
                    if migration.version in seen:
                        continue
                    for statement in _statements(migration.sql):
                        connection.execute(statement)
                    connection.execute(
                        self._sql["record_migration"],
                        {
                            "version": migration.version,
                            "name": migration.name,
                            "applied_at": to_micros(now),
                        },
                    )
                    applied.append(migration.version)
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        return applied

    def schema_version(self) -> int:
        with self._connect() as connection:
            if connection.execute(self._sql["migrations_table_exists"]).fetchone() == (0,):
                return 0
            versions = [row[0] for row in connection.execute(self._sql["applied_versions"])]
        return max(versions, default=0)

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
        params = schedule_params(
            tenant=tenant,
            key=key,
            job=job,
            origin=origin,
            trigger=trigger,
            payload=payload,
            next_run_at=next_run_at,
            now=now,
        )
        params["now"] = to_micros(now)
        params["next_run_at"] = None if next_run_at is None else to_micros(next_run_at)
        with self._connect() as connection:
            row = self._one(connection, "upsert_schedule", params)
        assert row is not None
        return row

    def get_schedule(self, tenant: str | None, key: str) -> Schedule:
        with self._connect() as connection:
            found = self._one(
                connection, "select_schedule", {"tenant": tenant_column(tenant), "key": key}
            )
        return known(found, tenant, key)

    def list_schedules(self, tenant: str | None, *, all_tenants: bool = False) -> list[Schedule]:
        name = "select_schedules_of_all_tenants" if all_tenants else "select_schedules_of_tenant"
        with self._connect() as connection:
            cursor = connection.execute(self._sql[name], {"tenant": tenant_column(tenant)})
            return [_schedule(cursor, row) for row in cursor.fetchall()]

    def set_paused(self, tenant: str | None, key: str, paused: bool, now: datetime) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key, "paused": int(paused)}
        with self._connect() as connection:
            found = self._one(connection, "set_paused", {**params, "now": to_micros(now)})
        return known(found, tenant, key)

    def remove_schedule(self, tenant: str | None, key: str, now: datetime) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key, "now": to_micros(now)}
        with self._connect() as connection:
            found = self._one(connection, "remove_schedule", params)
        return known(found, tenant, key)

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
        stored_tenant = tenant_column(tenant)
        advance = {
            "tenant": stored_tenant,
            "key": key,
            "expected": _micros_or_none(expected_next_run_at),
            "next_run_at": _micros_or_none(next_run_at),
            "now": to_micros(now),
        }
        with self._connect() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                row = connection.execute(self._sql["advance_schedule"], advance).fetchone()
                inserted = 0
                if row is not None:
                    for item in planned:
                        params = occurrence_params(row[0], stored_tenant, item, now)
                        for name in ("scheduled_for", "run_after", "now"):
                            params[name] = to_micros(params[name])
                        cursor = connection.execute(self._sql["insert_occurrence"], params)
                        inserted += cursor.rowcount
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        return inserted

    def next_due_at(self) -> datetime | None:
        with self._connect() as connection:
            row = connection.execute(self._sql["next_schedule_due"]).fetchone()
        return None if row is None or row[0] is None else from_micros(row[0])

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
        params = {
            "tenant": tenant_column(tenant),
            "key": key,
            "since": _micros_or_none(since),
            "until": _micros_or_none(until),
            "status": status,
            "limit": limit,
        }
        with self._connect() as connection:
            cursor = connection.execute(self._sql["select_history"], params)
            names = [column[0] for column in cursor.description]
            result = []
            for row in cursor.fetchall():
                values = dict(zip(names, row, strict=True))
                for name in ("scheduled_for", "started_at", "finished_at"):
                    values[name] = _micros_or_none_back(values[name])
                result.append(records.occurrence(values))
        return result

    def _one(
        self, connection: sqlite3.Connection, name: str, params: dict[str, Any]
    ) -> Schedule | None:
        cursor = connection.execute(self._sql[name], params)
        row = cursor.fetchone()
        return None if row is None else _schedule(cursor, row)

    def close(self) -> None:
        """Nothing to release: connections are opened per operation."""


def _schedule(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Schedule:
    values = dict(zip((column[0] for column in cursor.description), row, strict=True))
    for name in ("next_run_at", "created_at", "updated_at"):
        if values[name] is not None:
            values[name] = from_micros(values[name])
    values["trigger_spec"] = json.loads(values["trigger_spec"])
    values["payload"] = json.loads(values["payload"])
    return records.schedule(values)
