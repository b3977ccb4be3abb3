"""The production store: PostgreSQL through psycopg 3, with a connection pool."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import tuple_row

from oncely.errors import StoreUnavailable
from oncely.model import (
    Claim,
    Claims,
    Lease,
    Materialisation,
    Materialised,
    Saving,
    Schedule,
    Skipped,
    skip_cause,
)
from oncely.store import claiming, housekeeping, records
from oncely.store.base import Decision, SqlStore
from oncely.store.dialect import Row
from oncely.store.interface import Watch
from oncely.store.listener import Listener
from oncely.store.postgres_connections import (
    KEEPALIVES,
    TIMEOUT_S,
    Connection,
    PostgresConnections,
)
from oncely.store.queries import migrations, queries
from oncely.store.records import SAVE_CHUNK, occurrence_params, tenant_column


class PostgresStore(PostgresConnections, SqlStore):
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

    def save_schedules(
        self, batch: Sequence[Saving], now: datetime, *, within: Any = None
    ) -> list[Schedule]:
        if not batch:
            return []
        params = records.batch_params(batch, now)
        # Written in (tenant, key) order, the whole batch across its chunks: two batches of the
        # same new keys in opposite orders each took half of them and deadlocked on the rest.
        order = sorted(range(len(batch)), key=lambda n: (params[n]["tenant"], params[n]["key"]))
        chunks = [
            [(n, batch[n], params[n]) for n in order[start : start + SAVE_CHUNK]]
            for start in range(0, len(order), SAVE_CHUNK)
        ]
        with self._writing(within) as connection:
            if within is None and len(batch) == 1 and not batch[0].keyless:
                new = self._saved_if_new(connection, batch[0], params[0], now)
                if new is not None:
                    return [new]
            existing, horizon = self._locked_to_save(connection, batch, params, order)
            # Every chunk decided before any is written: an item refused in a later chunk left
            # the earlier ones written in the caller's transaction, for it to commit.
            decided = [self._decide(chunk, existing, horizon) for chunk in chunks]
            upserts = []
            with connection.pipeline():
                # Every chunk sent before any result is read: the server writes one chunk
                # while this process encodes the next, and a keyless defer is one round trip.
                for chunk, decision in zip(chunks, decided, strict=True):
                    keyless = all(item.keyless for _, item, _ in chunk)
                    statement = "insert_schedules" if keyless else "upsert_schedules"
                    upserts.append((chunk, self._send_chunk(connection, decision, now, statement)))
                self._notify(connection)
                if within is None:
                    connection.execute(self._sql["commit"])
            saved: dict[int, Schedule] = {}
            for chunk, upsert in upserts:
                values = {(row["tenant"], row["key"]): row for row in upsert.fetchall()}
                for index, item, p in chunk:
                    saved[index] = records.saved(values[p["tenant"], p["key"]], item)
        return [saved[n] for n in range(len(batch))]

    def _locked_to_save(
        self,
        connection: Connection,
        batch: Sequence[Saving],
        params: Sequence[dict[str, Any]],
        order: Sequence[int],
    ) -> tuple[dict[tuple[str, str], Row], datetime | None]:
        """The stored rows of the keyed items of ``batch``, locked in ``order``, and the history
        horizon; one round trip for the whole batch, none when every item is keyless."""
        # A keyless one-off has a new random key: nothing can be stored under it yet.
        keyed = [params[n] for n in order if not batch[n].keyless]
        existing: dict[tuple[str, str], Row] = {}
        horizon: datetime | None = None
        if keyed:
            locks = {"tenants": [p["tenant"] for p in keyed], "keys": [p["key"] for p in keyed]}
            for row in self._rows(connection, "lock_schedules_to_save", locks):
                existing[row["tenant"], row["key"]] = row
                horizon = row["horizon"]
        return existing, horizon

    def _saved_if_new(
        self, connection: Connection, item: Saving, params: dict[str, Any], now: datetime
    ) -> Schedule | None:
        """``item`` saved and committed in one round trip if its key is stored nowhere; else
        None, nothing written, and ``connection`` in no transaction."""
        decision = self._decide([(0, item, params)], {}, None)
        try:
            with connection.pipeline():
                inserted = self._send_chunk(connection, decision, now, "insert_schedules")
                self._notify(connection)
                connection.execute(self._sql["commit"])
        except psycopg.errors.UniqueViolation:
            connection.rollback()  # and its NOTIFY with it: the save that follows sends one
            return None
        row = inserted.fetchone()
        assert row is not None
        return records.saved(row, item)

    def _send_chunk(
        self, connection: Connection, decision: Decision, now: datetime, statement: str
    ) -> psycopg.Cursor[dict[str, Any]]:
        """Send the statements that save one chunk of a batch as `_decide` decided it, by
        ``statement`` (upsert_schedules, or insert_schedules for keys stored nowhere), in the
        open pipeline; the cursor returns the saved rows once the pipeline ends."""
        decided, planned, replaced_ids = decision
        rows = [{**row, "next_run_at": _iso(row["next_run_at"]), "now": None} for row in decided]
        occurrences = records.saved_occurrences(planned, datetime.isoformat)
        if replaced_ids:
            supersede = {"ids": _bigint_array(replaced_ids), "reason": records.SUPERSEDED}
            connection.execute(self._sql["supersede_pending"], supersede)
        upsert = self._cursor_on(connection)
        saving = {"rows": json.dumps(rows), "occurrences": json.dumps(occurrences), "now": now}
        upsert.execute(self._sql[statement], saving)
        return upsert

    def materialise_many(self, batch: Sequence[Materialisation], now: datetime) -> Materialised:
        if not batch:
            return Materialised()
        with self._connect() as connection:
            wanted = {
                "tenants": [tenant_column(item.tenant) for item in batch],
                "keys": [item.key for item in batch],
                "expected": [item.expected_next_run_at for item in batch],
            }
            locked = {
                (row["tenant"], row["key"])
                for row in self._rows(connection, "lock_schedules_to_materialise", wanted)
            }
            mine = [item for item in batch if (tenant_column(item.tenant), item.key) in locked]
            if not mine:
                return Materialised()
            # Three pipelined round trips for the whole batch, not three per schedule: a
            # thousand schedules due on one second took a worker most of that second.
            advance = [
                {
                    "tenant": tenant_column(item.tenant),
                    "key": item.key,
                    "expected": item.expected_next_run_at,
                    "next_run_at": item.next_run_at,
                    "now": now,
                }
                for item in mine
            ]
            advanced = [
                (item, row["id"], row["job"])
                for item, row in zip(mine, _each_row(connection, self._sql["advance_schedule"],
                                                     advance), strict=True)
                if row is not None and item.planned
            ]  # fmt: skip
            stale = [
                ({"schedule_id": sid, "before": item.stale_before, "reason": item.stale_reason,
                  "now": now}, job)
                for item, sid, job in advanced
                if item.stale_before is not None
            ]  # fmt: skip
            superseded = _each_row(connection, self._sql["supersede_stale"], [p for p, _ in stale])
            skipped = [
                Skipped(job, "misfire")
                for (_, job), row in zip(stale, superseded, strict=True)
                for _ in range(row["superseded"] if row is not None else 0)
            ]
            serial = [(item, sid) for item, sid, _ in advanced if item.overlap != "allow"]
            counts = dict(
                zip(
                    (sid for _, sid in serial),
                    _each_row(
                        connection,
                        self._sql["in_progress"],
                        [{"schedule_id": sid} for _, sid in serial],
                    ),
                    strict=True,
                )
            )
            rows, jobs = [], []
            for item, schedule_id, job in advanced:
                planned = item.planned
                found = counts.get(schedule_id)
                if found is not None:
                    planned = claiming.with_overlap(
                        planned, item.overlap, found["waiting"], found["running"], now
                    )
                stored_tenant = tenant_column(item.tenant)
                rows += [occurrence_params(schedule_id, stored_tenant, p, now) for p in planned]
                jobs += [job] * len(planned)
            # One result per row, in the same pipelined round trip: only what this worker wrote
            # counts (another may have written the same occurrence first).
            written = _each_row(connection, self._sql["insert_occurrence"], rows)
            skipped += [
                Skipped(job, skip_cause(row["reason"] or ""))
                for job, row in zip(jobs, written, strict=True)
                if row is not None and row["status"] == "skipped"
            ]
            return Materialised(sum(row is not None for row in written), skipped)

    def mark_invalid(
        self, schedules: Sequence[tuple[str | None, str, str]], now: datetime
    ) -> list[tuple[str | None, str]]:
        if not schedules:
            return []
        params = {
            "tenants": [tenant_column(tenant) for tenant, _, _ in schedules],
            "keys": [key for _, key, _ in schedules],
            "reasons": [reason for _, _, reason in schedules],
            "now": now,
        }
        with self._connect() as connection:
            stopped = self._rows(connection, "mark_invalid", params)
            invalid = [
                claiming.invalid_occurrence_params(
                    row["id"], row["tenant"], row["stopped_at"], row["reason"], now
                )
                for row in stopped
                if row["stopped_at"] is not None
            ]
            self._changed_each(connection, "insert_occurrence", invalid)
        found = sorted((row["tenant"], row["key"]) for row in stopped)
        return [(records.tenant_of(tenant), key) for tenant, key in found]

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
        ids = _bigint_array(c.occurrence_id for c in admitted)
        starts = {"ids": ids, "fences": fences, "owner": owner, "until": until, "now": now}
        self._keep_lost(connection, admitted, now)
        self._changed(connection, "start_attempts", starts)
        reclaimed = {c.occurrence_id for c in admitted if c.reclaimed}
        rows = self._rows(connection, "select_claimed", {"ids": ids})
        return [claiming.claim(row, reclaimed) for row in rows]

    def _held(
        self, connection: Any, candidates: list[claiming.Candidate], schedule_ids: list[int]
    ) -> list[claiming.Candidate]:
        ids = {"ids": _bigint_array(schedule_ids)}
        locked = {row["id"] for row in self._rows(connection, "lock_schedules", ids)}
        return [c for c in candidates if c.schedule_id in locked]

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
        params = {"id": claim.occurrence_id, "fence": claim.fence, "now": now}
        try:
            with within.pipeline() if _PIPELINES else nullcontext():
                within.execute(self._sql["book_one_success"], params)
                if claim.failure_streak:
                    streak = {"ids": _bigint_array([claim.schedule_id])}
                    within.execute(self._sql["reset_failures"], streak)
                within.execute(self._sql["notify_outcome"])
                within.commit()
        except psycopg.errors.DivisionByZero:
            within.rollback()  # the lease was taken over: the handler's writes go with it
            return False
        return True

    def _rows(self, connection: Any, name: str, params: Mapping[str, Any]) -> list[Row]:
        cursor = self._cursor_on(connection)
        cursor.execute(self._statement(name, params), params, prepare=_prepared(name))
        return cursor.fetchall()

    def _ids(self, connection: Any, name: str, params: Mapping[str, Any]) -> set[int]:
        cursor = connection.cursor(row_factory=tuple_row)
        cursor.execute(self._statement(name, params), params, prepare=_prepared(name))
        return {row[0] for row in cursor.fetchall()}

    def _changed(self, connection: Any, name: str, params: Mapping[str, Any]) -> int:
        cursor = self._cursor_on(connection)
        cursor.execute(self._statement(name, params), params, prepare=_prepared(name))
        return cursor.rowcount

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

    def _history_of_key(self, all_tenants: bool) -> str:
        # No index has the key alone: of every tenant, the schedules were read whole, 6.5 ms
        # at 100,000 schedules against 2.7 ms by the generic query.
        return "select_history" if all_tenants else "select_history_of_key"

    def _notify_outcome(self, connection: Any) -> None:
        connection.execute(self._sql["notify_outcome"])

    def _texts(self, values: Iterable[str]) -> list[str]:
        return list(values)

    def _ints(self, values: Iterable[int]) -> str:
        return _bigint_array(values)

    def _claims(self, claims: Sequence[Claim]) -> dict[str, Any]:
        return {
            "ids": _bigint_array(c.occurrence_id for c in claims),
            "fences": _bigint_array(c.fence for c in claims),
        }

    def _leases_until(self, leases: Sequence[tuple[Claim, datetime]]) -> dict[str, Any]:
        return {**self._claims([c for c, _ in leases]), "untils": [until for _, until in leases]}


# A libpq older than 14 has no pipeline mode: there the booking and the COMMIT of a
# transactional handler are two round trips instead of one.
_PIPELINES = psycopg.Pipeline.is_supported()


# Planned for their arrays every time, never prepared: statistics taken while nothing ran say
# "no running rows", and the generic plan psycopg's prepared statement gets after five runs then
# read every running row once per booked one (10 ms for 30 rows with 1,100 running; a burst's
# booking took 60% of the worker's loop).
_UNPREPARED = frozenset({"book_success", "extend_leases", "release_claims", "mark_left_running"})


# The limit is written into the statement, not bound: PostgreSQL costed the generic plan for an
# unknown limit (a tenth of the table), so from some tens of thousands of schedules on it planned
# the prepared query anew on every tick, and an idle tick took longer the more schedules were
# stored. The engine asks with one limit: one statement.
_LIMIT_WRITTEN = frozenset({"due_schedules"})


def _prepared(name: str) -> bool | None:
    """psycopg's ``prepare`` for query ``name``: False for `_UNPREPARED`, else its default."""
    return False if name in _UNPREPARED else None


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _bigint_array(values: Iterable[int]) -> str:
    """``values`` as a PostgreSQL array literal, for the ``::bigint[]`` ids and fences of a
    batch: psycopg dumps a list element by element in Python, which was a tenth of a burst's
    loop in a profile."""
    return "{" + ",".join(str(int(value)) for value in values) + "}"


def _each_row(
    connection: Connection, query: str, params: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any] | None]:
    """The first row (or None) of ``query`` run once per item of ``params``, pipelined."""
    if not params:
        return []
    with connection.cursor() as cursor:
        cursor.executemany(query, params, returning=True)
        found = []
        while True:
            found.append(cursor.fetchone())
            if not cursor.nextset():
                return found
