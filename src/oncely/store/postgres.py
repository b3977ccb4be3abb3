"""The production store: PostgreSQL through psycopg 3, with a connection pool."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import tuple_row

from oncely.errors import StoreUnavailable
from oncely.model import Claim, Claims, Lease
from oncely.store import claiming, housekeeping
from oncely.store.bookings import final_cuts
from oncely.store.dialect import Row
from oncely.store.interface import Watch
from oncely.store.listener import Listener
from oncely.store.postgres_connections import KEEPALIVES, TIMEOUT_S, Connection
from oncely.store.postgres_partitions import day_start
from oncely.store.postgres_schedules import PostgresSchedules
from oncely.store.queries import migrations, queries

CursorT = TypeVar("CursorT", bound="psycopg.Cursor[Any]")


class PostgresStore(PostgresSchedules):
    """A store in one PostgreSQL database; any number of workers on any machines may share it.

    Connections come from a pool of at most ``max_size``, opened on first use, in the process
    that uses it: a pool inherited across ``fork`` (gunicorn's preload) would share sockets
    between processes. Through an outage (a server restart, cut connections) a call fails within
    about 5 s with `StoreUnavailable`, and once the server is back the next call succeeds on the
    same store: connections the server closed are never handed out.
    """

    dialect = "postgres"

    def __init__(self, conninfo: str, max_size: int = 8) -> None:
        super().__init__(conninfo, max_size)
        self._sql = queries("postgres")

    def migrate(self, now: datetime) -> list[int]:
        applied: list[int] = []
        if self.schema_version() == len(migrations("postgres")):
            # Every worker start migrates: an up-to-date schema costs it one read, not a
            # connection of its own.
            return applied
        with self._session() as connection:
            connection.execute(self._sql["lock_migrations"])
            connection.execute(self._sql["create_migrations_table"])
            seen = {row["version"] for row in connection.execute(self._sql["applied_versions"])}
            for migration in migrations("postgres"):
                if migration.version in seen:
                    continue
                record = {"version": migration.version, "name": migration.name, "applied_at": now}
                if migration.transactional:
                    with connection.transaction():
                        connection.execute(migration.sql.encode())
                        connection.execute(self._sql["record_migration"], record)
                else:
                    for statement in migration.statements:
                        connection.execute(statement.encode())
                    connection.execute(self._sql["record_migration"], record)
                applied.append(migration.version)
        return applied

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
        if limit <= 0 or not jobs:
            return Claims()
        due = now if due_by is None else max(due_by, now)
        free = sorted(set(jobs) - set(serial))
        serial_jobs = sorted(set(jobs) & set(serial))
        until = now + lease
        with self._connect() as connection:
            connection.execute(self._sql["prefer_ordered_scans"])
            admitted, skipped = self._admit(connection, now, due, limit, reclaim, serial_jobs, skip)
            claims = Claims(self._claim_admitted(connection, owner, until, now, admitted), skipped)
            if free and len(claims) < limit:
                params = {
                    "jobs": free,
                    "limit": limit - len(claims),
                    "owner": owner,
                    "until": until,
                    "now": now,
                    "due_by": due,
                }
                rows = self._rows(connection, "claim_free", params)
                claims += sorted(
                    (claiming.claim(row, ()) for row in rows),
                    key=lambda c: (c.scheduled_for, c.occurrence_id),
                )
        return claims

    def _claim_admitted(
        self,
        connection: Connection,
        owner: str,
        until: datetime,
        now: datetime,
        admitted: list[claiming.Candidate],
    ) -> list[Claim]:
        """Claim the ``admitted`` expired leases to rerun and occurrences of serial jobs, their
        schedules locked."""
        if not admitted:
            return []
        taken = self._rows(connection, "take_fences", {"count": len(admitted)})
        fences = _bigint_array(row["fence"] for row in taken)
        rows_of = self._candidates_of(admitted)
        starts = {**rows_of, "fences": fences, "owner": owner, "until": until, "now": now}
        self._keep_lost(connection, admitted, now)
        self._changed(connection, "start_attempts", starts)
        reclaimed = {c.occurrence_id for c in admitted if c.reclaimed}
        rows = self._rows(connection, "select_claimed", rows_of)
        return [claiming.claim(row, reclaimed) for row in rows]

    def _held(
        self, connection: Any, candidates: list[claiming.Candidate], schedule_ids: list[int]
    ) -> list[claiming.Candidate]:
        ids = {"ids": _bigint_array(schedule_ids)}
        locked = {row["id"] for row in self._rows(connection, "lock_schedules", ids)}
        return [c for c in candidates if c.schedule_id in locked]

    def prepare_history(self, now: datetime) -> None:
        self.make_days_ahead(now)

    def prune(
        self, before: datetime, limit: int, *, by_status: Mapping[str, datetime] | None = None
    ) -> int:
        cuts = {
            status: day_start(cut.astimezone(UTC).date())
            for status, cut in final_cuts(before, by_status).items()
        }
        first, last = min(cuts.values()), max(cuts.values())
        with self._writing() as connection:
            # Attempts a version 13 worker kept during a rolling deploy get their time first.
            self._changed(connection, "date_attempts", {})
            # Raised before any day goes: no defer may see a day gone while it is lower.
            self._changed(connection, "raise_history_horizon", {"before": last})
        # Whole days, once every status's history in them has had its time; a status kept a
        # shorter time than another goes as rows from the days between.
        dropped, kept = self.drop_days_before(first)
        gone = {"before": first, "limit": limit}
        while True:  # the attempts of the days gone, each batch a transaction of its own
            with self._writing() as connection:
                if self._changed(connection, "prune_attempts", gone) < limit:
                    break
        pruned = 0
        if kept or first < last:
            with self._writing() as connection:
                pruned = self._prune_occurrences(connection, cuts, limit)
        with self._writing() as connection:
            self._prune_the_rest(connection, day_start(before.astimezone(UTC).date()), limit)
        return dropped + pruned

    def acquire_lease(self, name: str, owner: str, ttl: timedelta, now: datetime) -> Lease | None:
        params = {"name": name, "owner": owner, "until": now + ttl, "now": now}
        with self._connect() as connection:
            row = self._row(connection, "acquire_lease", params)
        return None if row is None else housekeeping.lease(row)

    def database_now(self) -> datetime | None:
        with self._connect() as connection:
            row = self._row(connection, "database_now", {})
        assert row is not None
        now: datetime = row["now"]
        return now.astimezone(UTC)

    def watch(self, on_change: Callable[[], None], *, outcomes: bool = False) -> Watch | None:
        try:
            conninfo = make_conninfo(self.conninfo, connect_timeout=TIMEOUT_S, **KEEPALIVES)
            connection = psycopg.connect(conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot watch PostgreSQL for changes: {exc}") from exc
        try:
            connection.execute(self._sql["listen_changes"])
            if outcomes:
                connection.execute(self._sql["listen_outcomes"])
        except psycopg.Error as exc:
            connection.close()
            raise StoreUnavailable(f"cannot watch PostgreSQL for changes: {exc}") from exc
        return Listener(connection, on_change)

    @contextmanager
    def _picked(
        self, name: str, params: Mapping[str, Any]
    ) -> Iterator[tuple[Connection, list[Row]]]:
        # The rows are read FOR UPDATE SKIP LOCKED: one another sweep or claim holds is left.
        with self._connect() as connection:
            yield connection, self._rows(connection, name, params)

    def commit_success(self, claim: Claim, now: datetime, *, within: Any) -> bool:
        params = {**self._claim(claim), "now": now}
        try:
            with within.pipeline() if _PIPELINES else nullcontext():
                within.execute(self._sql["book_one_success"], params)
                if claim.failure_streak:
                    streak = {"ids": _bigint_array([claim.schedule_id])}
                    within.execute(self._sql["reset_failures"], streak)
                # A statement in the pipeline, not within.commit(): that synced the pipeline,
                # and leaving it synced again, a second round trip per job.
                within.execute(self._sql["commit"])
        except psycopg.errors.DivisionByZero:
            within.rollback()  # the lease was taken over: the handler's writes go with it
            return False
        return True

    def tell_outcomes(self) -> None:
        with self._connect() as connection:
            self._notify_outcome(connection)

    def _rows(self, connection: Any, name: str, params: Mapping[str, Any]) -> list[Row]:
        return self._run(self._cursor_on(connection), name, params).fetchall()

    def _ids(self, connection: Any, name: str, params: Mapping[str, Any]) -> set[int]:
        cursor = self._run(connection.cursor(row_factory=tuple_row), name, params)
        return {row[0] for row in cursor.fetchall()}

    def _changed(self, connection: Any, name: str, params: Mapping[str, Any]) -> int:
        return self._run(self._cursor_on(connection), name, params).rowcount

    def _run(self, cursor: CursorT, name: str, params: Mapping[str, Any]) -> CursorT:
        if name in _JOINED_TO_ARRAYS:
            cursor.execute(self._sql["join_by_hash"])
        cursor.execute(self._statement(name, params), params, prepare=_prepared(name))
        return cursor

    def _changed_each(self, connection: Any, name: str, params: Sequence[Mapping[str, Any]]) -> int:
        if not params:
            return 0
        with self._cursor_on(connection) as cursor:
            cursor.executemany(self._sql[name], params)
            return cursor.rowcount

    def _statement(self, name: str, params: Mapping[str, Any]) -> str:
        if name not in _LIMIT_WRITTEN:
            return self._sql[name]
        return self._sql[name].replace("%(limit)s", str(int(params["limit"])))

    def _notify(self, connection: Any) -> None:
        connection.execute(self._sql["notify_change"])

    def _keep_attempt(self, connection: Any, occurrence_id: int, outcome: str) -> None:
        """Nothing: book_retry, reclaim and retry_failed keep the attempt in the same statement."""

    def _notify_outcome(self, connection: Any) -> None:
        connection.execute(self._sql["notify_outcome"])

    def _texts(self, values: Iterable[str]) -> list[str]:
        return list(values)

    def _ints(self, values: Iterable[int]) -> str:
        return _bigint_array(values)

    def _claims(self, claims: Sequence[Claim]) -> dict[str, Any]:
        return {**self._candidates_of(claims), "fences": _bigint_array(c.fence for c in claims)}

    def _leases_until(self, leases: Sequence[tuple[Claim, datetime]]) -> dict[str, Any]:
        return {**self._claims([c for c, _ in leases]), "untils": [until for _, until in leases]}


# A libpq older than 14 has no pipeline mode: there the booking and the COMMIT of a
# transactional handler are two round trips instead of one.
_PIPELINES = psycopg.Pipeline.is_supported()


# Statements joined to arrays of claims. Planned for their arrays every time, never prepared:
# statistics taken while nothing ran say "no running rows", and the generic plan psycopg's
# prepared statement gets after five runs then read every running row once per booked one (10 ms
# for 30 rows with 1,100 running; a burst's booking took 60% of the worker's loop). Each runs
# after join_by_hash, for the same reason at plan time (its comment).
_JOINED_TO_ARRAYS = frozenset(
    {"book_success", "extend_leases", "release_claims", "mark_left_running"}
)


# The limit is written into the statement, not bound: PostgreSQL costed the generic plan for an
# unknown limit (a tenth of the table), so from some tens of thousands of schedules on it planned
# the prepared query anew on every tick, and an idle tick took longer the more schedules were
# stored. The engine asks with one limit: one statement.
_LIMIT_WRITTEN = frozenset({"due_schedules"})


def _prepared(name: str) -> bool | None:
    """psycopg's ``prepare`` for query ``name``: False for `_JOINED_TO_ARRAYS`, else its
    default."""
    return False if name in _JOINED_TO_ARRAYS else None


def _bigint_array(values: Iterable[int]) -> str:
    """``values`` as a PostgreSQL array literal, for the ``::bigint[]`` ids and fences of a
    batch: psycopg dumps a list element by element in Python, which was a tenth of a burst's
    loop in a profile."""
    return "{" + ",".join(str(int(value)) for value in values) + "}"
