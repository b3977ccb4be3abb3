"""The embedded store: SQLite from the standard library, in WAL mode."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
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


_TIME_COLUMNS = frozenset(
    {"next_run_at", "created_at", "updated_at", "scheduled_for", "started_at", "finished_at"}
)


def _bind(params: Mapping[str, Any]) -> dict[str, Any]:
    """Query parameters for SQLite: every aware datetime becomes integer microseconds."""
    return {k: to_micros(v) if isinstance(v, datetime) else v for k, v in params.items()}


def _values(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    """A result row by column name, with time columns back as aware UTC datetimes."""
    values = dict(zip((column[0] for column in cursor.description), row, strict=True))
    for name in _TIME_COLUMNS.intersection(values):
        if values[name] is not None:
            values[name] = from_micros(values[name])
    return values


@contextmanager
def _transaction(connection: sqlite3.Connection, begin: str) -> Iterator[None]:
    """Run the block in one transaction opened by ``begin``; commit, or roll back and re-raise."""
    connection.execute(begin)
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


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
            connection.execute("PRAGMA foreign_keys = ON")
            yield connection
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"SQLite database {self.path!r}: {exc}") from exc
        finally:
            connection.close()

    def migrate(self, now: datetime) -> list[int]:
        applied: list[int] = []
        with self._connect() as connection:
            # WAL is a property of the file: set once here, where every process starts, and not
            # on every connection.
            _use_wal(connection)
            with _transaction(connection, self._sql["lock_migrations"]):
                connection.execute(self._sql["create_migrations_table"])
                seen = {row[0] for row in connection.execute(self._sql["applied_versions"])}
                for migration in migrations("sqlite"):
                    if migration.version in seen:
                        continue
                    for statement in _statements(migration.sql):
                        connection.execute(statement)
                    record = {"version": migration.version, "name": migration.name}
                    connection.execute(
                        self._sql["record_migration"], _bind({**record, "applied_at": now})
                    )
                    applied.append(migration.version)
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
        params = {"tenant": tenant_column(tenant), "key": key, "paused": int(paused), "now": now}
        with self._connect() as connection:
            found = self._one(connection, "set_paused", params)
        return known(found, tenant, key)

    def remove_schedule(self, tenant: str | None, key: str, now: datetime) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key, "now": now}
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
            "expected": expected_next_run_at,
            "next_run_at": next_run_at,
            "now": now,
        }
        with self._connect() as connection, _transaction(connection, "BEGIN IMMEDIATE"):
            row = connection.execute(self._sql["advance_schedule"], _bind(advance)).fetchone()
            if row is None:
                return 0
            rows = [_bind(occurrence_params(row[0], stored_tenant, p, now)) for p in planned]
            if not rows:
                return 0
            return connection.executemany(self._sql["insert_occurrence"], rows).rowcount

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
            "since": since,
            "until": until,
            "status": status,
            "limit": limit,
        }
        with self._connect() as connection:
            cursor = connection.execute(self._sql["select_history"], _bind(params))
            return [records.occurrence(_values(cursor, row)) for row in cursor.fetchall()]

    def _one(
        self, connection: sqlite3.Connection, name: str, params: dict[str, Any]
    ) -> Schedule | None:
        cursor = connection.execute(self._sql[name], _bind(params))
        row = cursor.fetchone()
        return None if row is None else _schedule(cursor, row)

    def close(self) -> None:
        """Nothing to release: connections are opened per operation."""


def _schedule(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Schedule:
    values = _values(cursor, row)
    values["trigger_spec"] = json.loads(values["trigger_spec"])
    values["payload"] = json.loads(values["payload"])
    return records.schedule(values)
