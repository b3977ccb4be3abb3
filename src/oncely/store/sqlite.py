"""The embedded store: SQLite from the standard library, in WAL mode."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from oncely.errors import TransactionTooLong
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
from oncely.store import claiming, housekeeping, payloads, records
from oncely.store.base import Item, SqlStore
from oncely.store.dialect import Row
from oncely.store.interface import Watch
from oncely.store.queries import migrations, queries
from oncely.store.records import occurrence_params, tenant_column
from oncely.store.sqlite_connections import (
    SqliteConnections,
    TransactionCut,
    current_transaction,
    in_transaction,
    statements,
    use_wal,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: Longest a `transaction` (a transactional handler's) may hold the one write lock: every other
#: writer, heartbeats and bookings included, waits for it. Past it the transaction is rolled
#: back, the lock freed, and the block raises `TransactionTooLong`.
TRANSACTION_MAX_S = 10.0


def to_micros(t: datetime) -> int:
    """Aware ``t`` as integer microseconds since the epoch (the SQLite time column type)."""
    return (t - _EPOCH) // timedelta(microseconds=1)


def _micros(t: datetime | None) -> int | None:
    return None if t is None else to_micros(t)


def from_micros(value: int) -> datetime:
    """The aware UTC datetime of a time column."""
    return _EPOCH + timedelta(microseconds=value)


_TIME_COLUMNS = frozenset(
    {
        "next_run_at", "created_at", "updated_at", "scheduled_for", "started_at", "finished_at",
        "run_after", "lease_expires_at", "expires_at", "first_seen_at", "last_seen_at",
        "applied_at", "previous_finished_at", "at", "horizon", "before", "due", "paused_until",
        "heartbeat_at",
    }
)  # fmt: skip


_JSON_COLUMNS = frozenset({"payload", "trigger_spec"})
#: Rows `SqliteStore.prune` deletes per write transaction.
PRUNE_BATCH = 200


def _bind(params: Mapping[str, Any]) -> dict[str, Any]:
    """Query parameters for SQLite: every aware datetime becomes integer microseconds."""
    return {k: to_micros(v) if isinstance(v, datetime) else v for k, v in params.items()}


def _decoded(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    """The cursor's rows by column name, with time columns back as aware UTC datetimes and JSON
    columns decoded (a stored value that does not decode becomes `Unreadable`)."""
    rows = cursor.fetchall()
    if not rows:
        return []
    # Which columns to convert is asked once per result, not once per row: per row, it was a
    # tenth of a burst's claim time.
    names = [column[0] for column in cursor.description]
    times = [name for name in names if name in _TIME_COLUMNS]
    texts = [name for name in names if name in _JSON_COLUMNS]
    decoded = []
    for row in rows:
        values = dict(zip(names, row, strict=True))
        for name in times:
            if values[name] is not None:
                values[name] = from_micros(values[name])
        for name in texts:
            if isinstance(values[name], str):
                values[name] = payloads.decode(values[name])
        decoded.append(values)
    return decoded


class SqliteStore(SqliteConnections, SqlStore):
    """A store in one SQLite file; any number of processes on one machine may share it.

    Each thread keeps one connection for the store's life; writers are lined up by SQLite's
    write lock (``BEGIN IMMEDIATE``), waited for up to the busy timeout.
    """

    dialect = "sqlite"

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._sql = queries("sqlite")

    def migrate(self, now: datetime) -> list[int]:
        applied: list[int] = []
        with self._connect() as connection:
            # WAL is a property of the file: set once here, where every process starts, and not
            # on every connection.
            use_wal(connection)
            with in_transaction(connection, self._sql["lock_migrations"]):
                connection.execute(self._sql["create_migrations_table"])
                seen = {row[0] for row in connection.execute(self._sql["applied_versions"])}
                for migration in migrations("sqlite"):
                    if migration.version in seen:
                        continue
                    for statement in statements(migration.sql):
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

    def save_schedules(
        self, batch: Sequence[Saving], now: datetime, *, within: Any = None
    ) -> list[Schedule]:
        if not batch:
            return []
        params = records.batch_params(batch, now)
        items = [(n, item, params[n]) for n, item in enumerate(batch)]
        with self._write(within) as connection:
            existing, horizon = self._locked_to_save(connection, items)
            # The whole batch decided before any of it is written: an item refused late left
            # the earlier ones written in the caller's transaction, for it to commit.
            rows, occurrences, replaced_ids = self._decide(items, existing, horizon)
            if replaced_ids:
                supersede = {"ids": json.dumps(replaced_ids), "reason": records.SUPERSEDED}
                self._changed(connection, "supersede_pending", supersede)
            stamp = to_micros(now)
            connection.executemany(
                self._sql["upsert_schedules"],
                [{**row, "next_run_at": _micros(row["next_run_at"]), "now": stamp} for row in rows],
            )
            if occurrences:
                planned = records.saved_occurrences(occurrences, to_micros)
                connection.executemany(
                    self._sql["insert_saved_occurrences"], [{**p, "now": stamp} for p in planned]
                )
        saved = []
        for item, row in zip(batch, rows, strict=True):
            stored = existing.get((row["tenant"], row["key"]))
            values = {
                "status": row["status"], "next_run_at": row["next_run_at"], "updated_at": now,
                "paused": False if stored is None else stored["paused"],
                "created_at": now if stored is None else stored["created_at"],
            }  # fmt: skip
            saved.append(records.saved(values, item))
        return saved

    def _locked_to_save(
        self, connection: sqlite3.Connection, items: Sequence[Item]
    ) -> tuple[dict[tuple[str, str], Row], datetime | None]:
        """The stored rows of the keyed ``items`` and the history horizon, in one statement;
        none when every item is keyless (a new random key: nothing can be stored under it)."""
        pairs = [[p["tenant"], p["key"]] for _, item, p in items if not item.keyless]
        existing: dict[tuple[str, str], Row] = {}
        horizon: datetime | None = None
        if pairs:
            locking = {"pairs": json.dumps(pairs)}
            for found in self._rows(connection, "lock_schedules_to_save", locking):
                existing[found["tenant"], found["key"]] = found
                horizon = found["horizon"]
        return existing, horizon

    def materialise_many(self, batch: Sequence[Materialisation], now: datetime) -> Materialised:
        if not batch:
            return Materialised()
        new, skipped = 0, list[Skipped]()
        with self._write() as connection:
            for item in batch:
                done = self._materialise_one(connection, item, now)
                new += done.new
                skipped += done.skipped
        return Materialised(new, skipped)

    def _materialise_one(
        self, connection: sqlite3.Connection, item: Materialisation, now: datetime
    ) -> Materialised:
        stored_tenant = tenant_column(item.tenant)
        advance = {
            "tenant": stored_tenant,
            "key": item.key,
            "expected": item.expected_next_run_at,
            "next_run_at": item.next_run_at,
            "now": now,
        }
        row = self._row(connection, "advance_schedule", advance)
        if row is None or not item.planned:
            return Materialised()
        schedule_id, job = row["id"], row["job"]
        planned = item.planned
        skipped: list[Skipped] = []
        if item.stale_before is not None:
            stale = {"schedule_id": schedule_id, "before": item.stale_before,
                     "reason": item.stale_reason, "now": now}  # fmt: skip
            superseded = self._changed(connection, "supersede_stale", stale)
            skipped += [Skipped(job, "misfire")] * superseded
        if item.overlap != "allow":
            counts = self._row(connection, "in_progress", {"schedule_id": schedule_id})
            assert counts is not None
            planned = claiming.with_overlap(
                planned, item.overlap, counts["waiting"], counts["running"], now
            )
        new = 0
        # Skipped ones one at a time, each with its own change count: only what this call wrote
        # counts (one there already is left as it is). They are the older ones, written first;
        # the pending ones stay one executemany.
        for p in planned:
            if p.status == "skipped":
                params = occurrence_params(schedule_id, stored_tenant, p, now)
                if self._changed(connection, "insert_occurrence", params):
                    new += 1
                    skipped.append(Skipped(job, skip_cause(p.reason or "")))
        pending = [p for p in planned if p.status == "pending"]
        rows = [occurrence_params(schedule_id, stored_tenant, p, now) for p in pending]
        new += self._changed_each(connection, "insert_occurrence", rows)
        return Materialised(new, skipped)

    def mark_invalid(
        self, schedules: Sequence[tuple[str | None, str, str]], now: datetime
    ) -> list[tuple[str | None, str]]:
        stopped: list[tuple[str | None, str]] = []
        if not schedules:
            return stopped
        with self._write() as connection:
            for tenant, key, reason in schedules:
                params = {"tenant": tenant_column(tenant), "key": key}
                found = self._row(connection, "lock_schedule", params)
                if found is None or found["status"] != "active":
                    continue
                change = {"schedule_id": found["id"], "reason": reason, "now": now}
                self._changed(connection, "mark_invalid", change)
                if found["next_run_at"] is not None:
                    invalid = claiming.invalid_occurrence_params(
                        found["id"], params["tenant"], found["next_run_at"], reason, now
                    )
                    self._changed(connection, "insert_occurrence", invalid)
                stopped.append((tenant, key))
        return stopped

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
        serial_jobs = set(jobs) & set(serial)
        with self._write() as connection:
            admitted, skipped = self._admit(connection, now, due, limit, reclaim, serial_jobs, skip)
            if len(admitted) < limit:
                free = set(jobs) - serial_jobs
                admitted += self._candidates(
                    connection, "claim_free", free, now, due, limit - len(admitted), False
                )
            if not admitted:
                return Claims(skipped=skipped)
            taken = self._row(connection, "take_fences", {"count": len(admitted)})
            assert taken is not None
            first = taken["fence"] - len(admitted) + 1
            # Bound here, once for the batch: bound row by row, the same two times were
            # converted a thousand times per claim.
            until, at = to_micros(now + lease), to_micros(now)
            starts = [
                {"id": c.occurrence_id, "fence": first + n, "owner": owner, "until": until,
                 "now": at}
                for n, c in enumerate(admitted)
            ]  # fmt: skip
            self._keep_lost(connection, admitted, now)
            connection.executemany(self._sql["start_attempts"], starts)
            ids = json.dumps([c.occurrence_id for c in admitted])
            reclaimed = {c.occurrence_id for c in admitted if c.reclaimed}
            rows = self._rows(connection, "select_claimed", {"ids": ids})
        return Claims((claiming.claim(row, reclaimed) for row in rows), skipped)

    def _held(
        self, connection: Any, candidates: list[claiming.Candidate], schedule_ids: list[int]
    ) -> list[claiming.Candidate]:
        return candidates  # the claim holds the one write lock

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """See `Store.transaction`. This store's own calls made inside the block, in the same
        thread or async task, join its transaction. It holds the write lock for at most
        `TRANSACTION_MAX_S`: then it is rolled back and the block raises `TransactionTooLong`."""
        # A connection of its own: the thread's shared one may be in use by the caller.
        connection = self._open()
        cut = TransactionCut(connection)
        timer = threading.Timer(TRANSACTION_MAX_S, cut)
        timer.daemon = True
        token = current_transaction.set((self, connection))
        try:
            with in_transaction(connection, "BEGIN IMMEDIATE"):
                timer.start()
                yield connection
        except sqlite3.Error as exc:
            if cut.done:
                raise self._too_long() from exc
            raise self._store_error(exc) from exc
        except BaseException as exc:
            if cut.done:
                raise self._too_long() from exc
            raise
        finally:
            current_transaction.reset(token)
            timer.cancel()
            with self._opened_lock:
                self._opened = [(t, c) for t, c in self._opened if c is not connection]
            cut.close()

    def _too_long(self) -> TransactionTooLong:
        return TransactionTooLong(
            f"a transaction on SQLite database {self.path!r} held SQLite's one write lock for "
            f"more than {TRANSACTION_MAX_S:g} s, so it was rolled back (every other writer, the "
            "worker's heartbeats included, waits for that lock); keep transactional handlers "
            "on SQLite short, or run them on PostgreSQL"
        )

    def acquire_lease(self, name: str, owner: str, ttl: timedelta, now: datetime) -> Lease | None:
        with self._write() as connection:
            taken = self._row(connection, "take_lease_token", {})
            assert taken is not None
            params = {"name": name, "owner": owner, "until": now + ttl, "now": now,
                      "token": taken["token"]}  # fmt: skip
            found = self._row(connection, "acquire_lease", params)
        return None if found is None else housekeeping.lease(found)

    def database_now(self) -> datetime | None:
        return None

    def prune(self, before: datetime, limit: int) -> int:
        """See `Store.prune`. In batches of at most `PRUNE_BATCH` rows, each its own write
        transaction: other writers (claims, heartbeats, bookings) get the one write lock in
        between, instead of waiting out the whole call."""
        pruned = 0
        while True:
            batch = min(PRUNE_BATCH, limit - pruned)
            with self._write() as connection:
                deleted = self._prune_occurrences(connection, before, batch)
                pruned += deleted
                last = deleted < batch or pruned >= limit
                if last:
                    self._prune_the_rest(connection, before, limit)
            if last:
                return pruned

    def watch(self, on_change: Callable[[], None], *, outcomes: bool = False) -> Watch | None:
        return None

    @contextmanager
    def _picked(
        self, name: str, params: Mapping[str, Any]
    ) -> Iterator[tuple[sqlite3.Connection | None, list[Row]]]:
        with self._connect() as connection:
            found = self._rows(connection, name, params)
        if not found:
            yield None, []  # the usual case: no write lock taken for nothing
            return
        with self._write() as connection:
            yield connection, found

    def commit_success(self, claim: Claim, now: datetime, *, within: Any) -> bool:
        params = {"id": claim.occurrence_id, "fence": claim.fence, "now": now}
        if not self._rows(within, "book_one_success", params):
            return False
        if claim.failure_streak:
            self._changed(within, "reset_failures", {"ids": self._ints([claim.schedule_id])})
        return True

    def _rows(self, connection: Any, name: str, params: Mapping[str, Any]) -> list[Row]:
        return _decoded(connection.execute(self._sql[name], _bind(params)))

    def _ids(self, connection: Any, name: str, params: Mapping[str, Any]) -> set[int]:
        return {row[0] for row in connection.execute(self._sql[name], _bind(params))}

    def _changed(self, connection: Any, name: str, params: Mapping[str, Any]) -> int:
        changed: int = connection.execute(self._sql[name], _bind(params)).rowcount
        return changed

    def _changed_each(self, connection: Any, name: str, params: Sequence[Mapping[str, Any]]) -> int:
        if not params:
            return 0
        changed: int = connection.executemany(self._sql[name], map(_bind, params)).rowcount
        return changed

    def _keep_attempt(self, connection: Any, occurrence_id: int, outcome: str) -> None:
        params = {"id": occurrence_id, "outcome": outcome, "kept": records.ATTEMPTS_KEPT}
        self._changed(connection, "keep_attempt", params)

    def _history_of_key(self, all_tenants: bool) -> str:
        return "select_history_of_key"

    def _notify_outcome(self, connection: Any) -> None:
        """Nothing: the dashboard polls SQLite."""

    def _notify(self, connection: Any) -> None:
        """Nothing: SQLite has no channel between processes; workers wake at the due time."""

    def _texts(self, values: Iterable[str]) -> str:
        return json.dumps(list(values))

    def _ints(self, values: Iterable[int]) -> str:
        return json.dumps(list(values))

    def _claims(self, claims: Sequence[Claim]) -> dict[str, Any]:
        return {"claims": json.dumps([[c.occurrence_id, c.fence] for c in claims])}

    def _leases_until(self, leases: Sequence[tuple[Claim, datetime]]) -> dict[str, Any]:
        triples = [[c.occurrence_id, c.fence, to_micros(until)] for c, until in leases]
        return {"leases": json.dumps(triples)}
