"""The embedded store: SQLite from the standard library, in WAL mode."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Any

from oncely.errors import ConfigurationError, StoreError, StoreUnavailable, TransactionTooLong
from oncely.model import Claim, Lease, Materialisation, Saving, Schedule
from oncely.store import claiming, housekeeping, payloads, records
from oncely.store.base import Item, SqlStore
from oncely.store.dialect import Row
from oncely.store.interface import Watch
from oncely.store.queries import migrations, queries
from oncely.store.records import SAVE_CHUNK, occurrence_params, tenant_column

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_BUSY_TIMEOUT_S = 30.0
#: Longest a `transaction` (a transactional handler's) may hold the one write lock: every other
#: writer, heartbeats and bookings included, waits for it. Past it the transaction is rolled
#: back, the lock freed, and the block raises `TransactionTooLong`.
TRANSACTION_MAX_S = 10.0
# The transaction open in this context (thread, or async handler's task): the store's own calls
# made inside it join it. Opening a second one waited 30 s on its own write lock, then failed.
_joined: ContextVar[tuple[SqliteStore, sqlite3.Connection] | None] = ContextVar(
    "oncely_sqlite_joined", default=None
)
_CACHE_KIB = 64 * 1024


def to_micros(t: datetime) -> int:
    """Aware ``t`` as integer microseconds since the epoch (the SQLite time column type)."""
    return (t - _EPOCH) // timedelta(microseconds=1)


def from_micros(value: int) -> datetime:
    """The aware UTC datetime of a time column."""
    return _EPOCH + timedelta(microseconds=value)


_TIME_COLUMNS = frozenset(
    {
        "next_run_at", "created_at", "updated_at", "scheduled_for", "started_at", "finished_at",
        "run_after", "lease_expires_at", "expires_at", "first_seen_at", "last_seen_at",
        "applied_at", "previous_finished_at", "at", "horizon", "before", "due",
    }
)  # fmt: skip


_JSON_COLUMNS = frozenset({"payload", "trigger_spec"})
#: Rows `SqliteStore.prune` deletes per write transaction.
PRUNE_BATCH = 200


def _bind(params: Mapping[str, Any]) -> dict[str, Any]:
    """Query parameters for SQLite: every aware datetime becomes integer microseconds."""
    return {k: to_micros(v) if isinstance(v, datetime) else v for k, v in params.items()}


def _values(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    """A result row by column name, with time columns back as aware UTC datetimes and JSON
    columns decoded (a stored value that does not decode becomes `Unreadable`)."""
    values = dict(zip((column[0] for column in cursor.description), row, strict=True))
    for name in _TIME_COLUMNS.intersection(values):
        if values[name] is not None:
            values[name] = from_micros(values[name])
    for name in _JSON_COLUMNS.intersection(values):
        if isinstance(values[name], str):
            values[name] = payloads.decode(values[name])
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


class _Cut:
    """Rolls a transaction back from another thread when it has held the lock too long: the
    running statement is interrupted and the connection closed (its next use raises)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.done = False
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            if self.done:
                return
            self.done = True
            self.connection.interrupt()
            self.connection.close()  # a close in a transaction rolls it back

    def close(self) -> None:
        with self._lock:
            self.connection.close()


class SqliteStore(SqlStore):
    """A store in one SQLite file; any number of processes on one machine may share it.

    Each thread keeps one connection for the store's life; writers are lined up by SQLite's
    write lock (``BEGIN IMMEDIATE``), waited for up to the busy timeout.
    """

    dialect = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self._sql = queries("sqlite")
        self._local = threading.local()
        # Each open connection with the thread that opened it.
        self._opened: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._opened_lock = threading.Lock()
        self._pid = os.getpid()

    def _open(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self.path, isolation_level=None, timeout=_BUSY_TIMEOUT_S, check_same_thread=False
            )
            connection.execute("PRAGMA foreign_keys = ON")
            # A burst touches pages all over the occurrence table and its indexes; with SQLite's
            # default 2 MiB page cache a 20,000-occurrence drain ran at a third of the speed.
            connection.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        with self._opened_lock:
            # The connections of threads that have ended are closed here: kept open, every
            # short-lived thread that used the store (one per request in some servers) held a
            # connection and its 64 MiB page cache until the store closed, gigabytes a minute.
            ended = [c for thread, c in self._opened if not thread.is_alive()]
            self._opened = [(t, c) for t, c in self._opened if t.is_alive()]
            self._opened.append((threading.current_thread(), connection))
        for stale in ended:
            stale.close()
        return connection

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        joined = _joined.get()
        if joined is not None and joined[0] is self:
            try:
                yield joined[1]
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite database {self.path!r} refused: {exc}") from exc
            return
        if self._pid != os.getpid():
            # A forked child (gunicorn's preload) must not share its parent's connections:
            # SQLite connections carried across fork corrupt locks. Forget them, unclosed.
            self._local, self._opened, self._pid = threading.local(), [], os.getpid()
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._open()
        try:
            yield connection
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"SQLite database {self.path!r}: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite database {self.path!r} refused: {exc}") from exc

    @contextmanager
    def _write(self, within: Any = None) -> Iterator[sqlite3.Connection]:
        """A connection holding the write lock for the block: one transaction, all or nothing.

        Or ``within``, the caller's connection, in the caller's transaction, never committed
        here. Inside a `transaction` of this store, a savepoint of it: the block's writes commit
        or roll back with that transaction.
        """
        if within is not None:
            connection = self._adopted(within)
            try:
                yield connection
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(f"SQLite database {self.path!r}: {exc}") from exc
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite database {self.path!r} refused: {exc}") from exc
            return
        joined = _joined.get()
        if joined is None or joined[0] is not self:
            with self._connect() as connection, _transaction(connection, "BEGIN IMMEDIATE"):
                yield connection
            return
        with self._connect() as connection:
            connection.execute("SAVEPOINT oncely_joined")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK TO oncely_joined")
                connection.execute("RELEASE oncely_joined")
                raise
            connection.execute("RELEASE oncely_joined")

    def _adopted(self, within: Any) -> sqlite3.Connection:
        """``within``, a caller's sqlite3 connection, once it is known to be in a transaction on
        this store's file; else `ConfigurationError` saying what is wrong."""
        if not isinstance(within, sqlite3.Connection):
            raise ConfigurationError(
                f"connection={within!r} is not a sqlite3 connection, and this app's database is "
                f"SQLite ({self.path}); pass a sqlite3.Connection to that file (or a SQLAlchemy "
                "Connection or Session, or Django's connection, on it)"
            )
        try:
            files = {row[1]: row[2] for row in within.execute("PRAGMA database_list")}
        except sqlite3.Error as exc:
            raise ConfigurationError(f"connection= cannot be used: {exc}") from exc
        theirs = files.get("main") or ":memory:"
        if not _same_file(theirs, self.path):
            raise ConfigurationError(
                f"connection= is on SQLite database {theirs!r}, not on this app's "
                f"({self.path!r}): oncely writes its timers only on its own database; pass a "
                "connection to that file"
            )
        if not within.in_transaction:
            # Each statement would commit on its own: a rollback of the caller's could not take
            # the timer back.
            raise ConfigurationError(
                "connection= is in no transaction, so oncely's writes would commit on their own; "
                'open one first (connection.execute("BEGIN"), or write on it first)'
            )
        return within

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

    def save_schedules(
        self, batch: Sequence[Saving], now: datetime, *, within: Any = None
    ) -> list[Schedule]:
        if not batch:
            return []
        params = records.batch_params(batch, now)
        items = [(n, item, params[n]) for n, item in enumerate(batch)]
        saved: list[Schedule] = []
        with self._write(within) as connection:
            for start in range(0, len(batch), SAVE_CHUNK):
                saved += self._save_chunk(connection, items[start : start + SAVE_CHUNK], now)
        return saved

    def _save_chunk(
        self, connection: sqlite3.Connection, chunk: Sequence[Item], now: datetime
    ) -> list[Schedule]:
        """Save one chunk of a batch, (index in the batch, item, params) each."""
        pairs = [[p["tenant"], p["key"]] for _, item, p in chunk if not item.keyless]
        existing: dict[tuple[str, str], Row] = {}
        horizon: datetime | None = None
        if pairs:
            for found in self._rows(
                connection, "lock_schedules_to_save", {"pairs": json.dumps(pairs)}
            ):
                existing[found["tenant"], found["key"]] = found
                horizon = found["horizon"]
        rows, occurrences, replaced_ids = self._decide(chunk, existing, horizon)
        if replaced_ids:
            supersede = {"ids": json.dumps(replaced_ids), "reason": records.SUPERSEDED}
            self._changed(connection, "supersede_pending", supersede)
        stamp = to_micros(now)
        upserted = self._rows(
            connection,
            "upsert_schedules",
            {
                "rows": json.dumps([{**_bind(r), "keyless": int(r["keyless"])} for r in rows]),
                "now": stamp,
            },
        )
        values = {(found["tenant"], found["key"]): found for found in upserted}
        if occurrences:
            planned = [records.saved_occurrence(s, p, to_micros) for s, p in occurrences]
            self._changed(
                connection, "insert_saved_occurrences", {"rows": json.dumps(planned), "now": stamp}
            )
        return [records.saved(values[p["tenant"], p["key"]], item) for _, item, p in chunk]

    def materialise_many(self, batch: Sequence[Materialisation], now: datetime) -> int:
        if not batch:
            return 0
        with self._write() as connection:
            return sum(self._materialise_one(connection, item, now) for item in batch)

    def _materialise_one(
        self, connection: sqlite3.Connection, item: Materialisation, now: datetime
    ) -> int:
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
            return 0
        schedule_id = row["id"]
        planned = item.planned
        if item.stale_before is not None:
            stale = {"schedule_id": schedule_id, "before": item.stale_before,
                     "reason": item.stale_reason, "now": now}  # fmt: skip
            self._changed(connection, "supersede_stale", stale)
        if item.overlap != "allow":
            counts = self._row(connection, "in_progress", {"schedule_id": schedule_id})
            assert counts is not None
            planned = claiming.with_overlap(
                planned, item.overlap, counts["waiting"], counts["running"], now
            )
        rows = [occurrence_params(schedule_id, stored_tenant, p, now) for p in planned]
        return self._changed_each(connection, "insert_occurrence", rows)

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
    ) -> list[Claim]:
        if limit <= 0 or not jobs:
            return []
        due = now if due_by is None else max(due_by, now)
        serial_jobs = set(jobs) & set(serial)
        with self._write() as connection:
            admitted = self._admit(connection, now, due, limit, reclaim, serial_jobs, skip)
            if len(admitted) < limit:
                free = set(jobs) - serial_jobs
                admitted += self._candidates(
                    connection, "claim_free", free, now, due, limit - len(admitted), False
                )
            if not admitted:
                return []
            taken = self._row(connection, "take_fences", {"count": len(admitted)})
            assert taken is not None
            first = taken["fence"] - len(admitted) + 1
            starts = [
                {"id": c.occurrence_id, "fence": first + n, "owner": owner, "until": now + lease,
                 "now": now}
                for n, c in enumerate(admitted)
            ]  # fmt: skip
            self._changed_each(connection, "start_attempts", starts)
            ids = json.dumps([c.occurrence_id for c in admitted])
            reclaimed = {c.occurrence_id for c in admitted if c.reclaimed}
            rows = self._rows(connection, "select_claimed", {"ids": ids})
        return [claiming.claim(row, reclaimed) for row in rows]

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
        cut = _Cut(connection)
        timer = threading.Timer(TRANSACTION_MAX_S, cut)
        timer.daemon = True
        token = _joined.set((self, connection))
        try:
            with _transaction(connection, "BEGIN IMMEDIATE"):
                timer.start()
                yield connection
        except sqlite3.OperationalError as exc:
            if cut.done:
                raise self._too_long() from exc
            raise StoreUnavailable(f"SQLite database {self.path!r}: {exc}") from exc
        except sqlite3.Error as exc:
            if cut.done:
                raise self._too_long() from exc
            raise StoreError(f"SQLite database {self.path!r} refused: {exc}") from exc
        except BaseException as exc:
            if cut.done:
                raise self._too_long() from exc
            raise
        finally:
            _joined.reset(token)
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

    def watch(self, on_change: Callable[[], None]) -> Watch | None:
        return None

    def reserve(self, users: int) -> None:
        """Nothing to do: each thread has its own connection."""

    def close(self) -> None:
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for _, connection in opened:
            connection.close()
        self._local = threading.local()

    def _reading(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._connect()

    def _writing(self, within: Any = None) -> AbstractContextManager[sqlite3.Connection]:
        return self._write(within)

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

    def _rows(self, connection: Any, name: str, params: Mapping[str, Any]) -> list[Row]:
        cursor = connection.execute(self._sql[name], _bind(params))
        return [_values(cursor, row) for row in cursor.fetchall()]

    def _changed(self, connection: Any, name: str, params: Mapping[str, Any]) -> int:
        changed: int = connection.execute(self._sql[name], _bind(params)).rowcount
        return changed

    def _changed_each(self, connection: Any, name: str, params: Sequence[Mapping[str, Any]]) -> int:
        if not params:
            return 0
        changed: int = connection.executemany(self._sql[name], map(_bind, params)).rowcount
        return changed

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


def _same_file(theirs: str, ours: str) -> bool:
    try:
        return os.path.samefile(theirs, ours)
    except OSError:
        return False
