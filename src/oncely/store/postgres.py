"""The production store: PostgreSQL through psycopg 3."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import psycopg

from oncely.errors import StoreUnavailable
from oncely.store.interface import Store
from oncely.store.queries import migrations, queries

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

    def close(self) -> None:
        """Nothing to release: connections are opened per operation."""
