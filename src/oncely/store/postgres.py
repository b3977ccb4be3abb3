"""The production store: PostgreSQL through psycopg 3."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from oncely.errors import StoreUnavailable
from oncely.model import Occurrence, OccurrenceStatus, Planned, Schedule, ScheduleOrigin
from oncely.recurrence import Trigger
from oncely.store import records
from oncely.store.interface import Store
from oncely.store.queries import migrations, queries
from oncely.store.records import known, occurrence_params, schedule_params, tenant_column

_CONNECT_TIMEOUT_S = 10


class PostgresStore(Store):
    """A store in one PostgreSQL database; any number of workers on any machines may share it."""

    dialect = "postgres"

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self._sql = queries("postgres")

    @contextmanager
    def _connect(self) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
        try:
            connection = psycopg.connect(self.conninfo, connect_timeout=_CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {exc}") from exc
        try:
            yield connection
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL: {exc}") from exc
        finally:
            connection.close()

    def migrate(self, now: datetime) -> list[int]:
        applied: list[int] = []
        with self._connect() as connection, connection.transaction():
            connection.execute(self._sql["lock_migrations"])
            connection.execute(self._sql["create_migrations_table"])
            seen = {row[0] for row in connection.execute(self._sql["applied_versions"])}
            for migration in migrations("postgres"):
                if migration.version in seen:
                    continue
                connection.execute(migration.sql.encode())
                connection.execute(
                    self._sql["record_migration"],
                    {"version": migration.version, "name": migration.name, "applied_at": now},
                )
                applied.append(migration.version)
        return applied

    def schema_version(self) -> int:
        with self._connect() as connection:
            if connection.execute(self._sql["migrations_table_exists"]).fetchone() == (0,):
                return 0
            rows = connection.execute(self._sql["applied_versions"]).fetchall()
        return max((v for (v,) in rows if isinstance(v, int)), default=0)

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
        row = self._one("upsert_schedule", params)
        assert row is not None
        return row

    def get_schedule(self, tenant: str | None, key: str) -> Schedule:
        found = self._one("select_schedule", {"tenant": tenant_column(tenant), "key": key})
        return known(found, tenant, key)

    def list_schedules(self, tenant: str | None, *, all_tenants: bool = False) -> list[Schedule]:
        name = "select_schedules_of_all_tenants" if all_tenants else "select_schedules_of_tenant"
        with self._connect() as connection, connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(self._sql[name], {"tenant": tenant_column(tenant)})
            return [records.schedule(row) for row in cursor.fetchall()]

    def set_paused(self, tenant: str | None, key: str, paused: bool, now: datetime) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key, "paused": paused, "now": now}
        return known(self._one("set_paused", params), tenant, key)

    def remove_schedule(self, tenant: str | None, key: str, now: datetime) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key, "now": now}
        return known(self._one("remove_schedule", params), tenant, key)

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
        with self._connect() as connection, connection.transaction():
            row = connection.execute(self._sql["advance_schedule"], advance).fetchone()
            if row is None:
                return 0
            schedule_id = row[0]
            assert isinstance(schedule_id, int)
            rows = [occurrence_params(schedule_id, stored_tenant, p, now) for p in planned]
            if not rows:
                return 0
            with connection.cursor() as cursor:
                # one pipelined round trip for all rows; rowcount is the number inserted
                cursor.executemany(self._sql["insert_occurrence"], rows)
                return cursor.rowcount

    def next_due_at(self) -> datetime | None:
        with self._connect() as connection:
            row = connection.execute(self._sql["next_schedule_due"]).fetchone()
        if row is None or not isinstance(row[0], datetime):
            return None
        return row[0].astimezone(UTC)

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
        with self._connect() as connection, connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(self._sql["select_history"], params)
            return [records.occurrence(row) for row in cursor.fetchall()]

    def _one(self, name: str, params: dict[str, Any]) -> Schedule | None:
        with (
            self._connect() as connection,
            connection.transaction(),
            connection.cursor(row_factory=dict_row) as cursor,
        ):
            cursor.execute(self._sql[name], params)
            row = cursor.fetchone()
        return None if row is None else records.schedule(row)

    def close(self) -> None:
        """Nothing to release: connections are opened per operation."""
