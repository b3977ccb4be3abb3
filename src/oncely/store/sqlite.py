"""The embedded store: SQLite from the standard library, in WAL mode."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from oncely.errors import (
    ConfigurationError,
    OncelyError,
    StoreError,
    StoreUnavailable,
    TransactionTooLong,
)
from oncely.model import (
    Abandoned,
    Action,
    Claim,
    CodeVersion,
    Failure,
    Lease,
    Materialisation,
    Occurrence,
    OccurrenceStatus,
    Planned,
    Reclaimed,
    Saving,
    Schedule,
    ScheduleStatus,
    Sweep,
    WorkerBeat,
)
from oncely.recurrence import At
from oncely.store import claiming, housekeeping, payloads, records
from oncely.store.interface import Store, Watch
from oncely.store.queries import migrations, queries
from oncely.store.records import (
    SAVE_CHUNK,
    known,
    occurrence_params,
    tenant_column,
    unknown_schedule,
)

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
        "applied_at", "previous_finished_at", "at", "horizon", "paused_until", "heartbeat_at",
    }
)  # fmt: skip


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


class SqliteStore(Store):
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
        saved: list[Schedule] = []
        with self._write(within) as connection:
            for start in range(0, len(batch), SAVE_CHUNK):
                chunk = slice(start, start + SAVE_CHUNK)
                saved += self._save_chunk(connection, batch[chunk], params[chunk], start, now)
        return saved

    def _save_chunk(
        self,
        connection: sqlite3.Connection,
        batch: Sequence[Saving],
        params: list[dict[str, Any]],
        first: int,
        now: datetime,
    ) -> list[Schedule]:
        """Save one chunk of a batch whose first item is item ``first``."""
        pairs = [[p["tenant"], p["key"]] for item, p in zip(batch, params, strict=True)
                 if not item.keyless]  # fmt: skip
        existing: dict[tuple[str, str], dict[str, Any]] = {}
        horizon: datetime | None = None
        if pairs:
            cursor = connection.execute(self._sql["lock_schedules_to_save"], [json.dumps(pairs)])
            for row in cursor.fetchall():
                found = _values(cursor, row)
                existing[found["tenant"], found["key"]] = found
                horizon = found["horizon"]
        rows, occurrences, replaced_ids = [], [], []
        for offset, (item, item_params) in enumerate(zip(batch, params, strict=True)):
            stored = existing.get((item_params["tenant"], item_params["key"]))
            try:
                decided, replaced = records.save_params(stored, item_params)
                if item.guard_horizon and isinstance(item.trigger, At):
                    records.refuse_before_horizon(stored, decided, item.trigger.when, horizon)
            except OncelyError as exc:
                exc.item = first + offset
                raise
            if replaced:
                assert stored is not None
                replaced_ids.append(stored["id"])
            if item.occurrences and (stored is None or replaced):
                occurrences += [
                    records.saved_occurrence(decided, p, to_micros) for p in item.occurrences
                ]
            rows.append({**_bind(decided), "keyless": int(decided["keyless"])})
        if replaced_ids:
            supersede = {"ids": json.dumps(replaced_ids), "reason": records.SUPERSEDED}
            connection.execute(self._sql["supersede_pending"], supersede)
        stamp = to_micros(now)
        cursor = connection.execute(
            self._sql["upsert_schedules"], {"rows": json.dumps(rows), "now": stamp}
        )
        values = {}
        for row in cursor.fetchall():
            found = _values(cursor, row)
            values[found["tenant"], found["key"]] = found
        if occurrences:
            connection.execute(
                self._sql["insert_saved_occurrences"],
                {"rows": json.dumps(occurrences), "now": stamp},
            )
        return [
            records.saved(values[p["tenant"], p["key"]], item)
            for item, p in zip(batch, params, strict=True)
        ]

    def get_schedule(self, tenant: str | None, key: str, *, within: Any = None) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key}
        if within is not None:
            with self._write(within) as connection:
                return known(self._one(connection, "select_schedule", params), tenant, key)
        with self._connect() as connection:
            found = self._one(connection, "select_schedule", params)
        return known(found, tenant, key)

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
        params["limit"] = -1 if limit is None else limit  # SQLite's "no limit"
        with self._connect() as connection:
            cursor = connection.execute(self._sql["select_schedules"], params)
            return [_schedule(cursor, row) for row in cursor.fetchall()]

    def code_schedule_keys(self) -> list[str]:
        with self._connect() as connection:
            rows = connection.execute(
                self._sql["code_schedule_keys"], {"tenant": tenant_column(None)}
            ).fetchall()
        return [row[0] for row in rows]

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
            "tenant": tenant_column(tenant), "key": key, "paused": int(paused), "now": now,
            "until": until if paused else None,
        }  # fmt: skip
        with self._write(within) as connection:
            found = self._one(connection, "set_paused", params)
        return known(found, tenant, key)

    def resume_ended_pauses(self, now: datetime, actor: str, limit: int = 100) -> list[Action]:
        with self._write() as connection:
            cursor = connection.execute(
                self._sql["lock_ended_pauses"], _bind({"now": now, "limit": limit})
            )
            ended = [_values(cursor, row) for row in cursor.fetchall()]
            if not ended:
                return []
            resumed = [records.pause_ended(row, now, actor) for row in ended]
            connection.executemany(
                self._sql["end_pause"], [_bind({"id": row["id"], "now": now}) for row in ended]
            )
            connection.executemany(
                self._sql["insert_action"],
                [_bind(housekeeping.action_params(action)) for action in resumed],
            )
        return resumed

    def remove_schedule(
        self, tenant: str | None, key: str, now: datetime, *, within: Any = None
    ) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key, "now": now}
        with self._write(within) as connection:
            waiting = {**params, "reason": records.REMOVED}
            connection.execute(self._sql["skip_waiting"], _bind(waiting))
            found = self._one(connection, "remove_schedule", params)
        return known(found, tenant, key)

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
        row = connection.execute(self._sql["advance_schedule"], _bind(advance)).fetchone()
        if row is None or not item.planned:
            return 0
        schedule_id = row[0]
        planned = item.planned
        if item.stale_before is not None:
            stale = {"schedule_id": schedule_id, "before": item.stale_before,
                     "reason": item.stale_reason, "now": now}  # fmt: skip
            connection.execute(self._sql["supersede_stale"], _bind(stale))
        if item.overlap != "allow":
            waiting, running = connection.execute(
                self._sql["in_progress"], {"schedule_id": schedule_id}
            ).fetchone()
            planned = claiming.with_overlap(planned, item.overlap, waiting, running, now)
        rows = [_bind(occurrence_params(schedule_id, stored_tenant, p, now)) for p in planned]
        return connection.executemany(self._sql["insert_occurrence"], rows).rowcount

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
        stored_tenant = tenant_column(tenant)
        with self._write(within) as connection:
            found = connection.execute(
                self._sql["schedule_id"], {"tenant": stored_tenant, "key": key}
            ).fetchone()
            if found is None:
                raise unknown_schedule(tenant, key)
            schedule_id = found[0]
            rows = [_bind(occurrence_params(schedule_id, stored_tenant, p, now)) for p in planned]
            if not rows:
                return 0
            added = connection.executemany(self._sql["insert_occurrence"], rows).rowcount
            if rearm_skipped:
                rearm = [
                    _bind({"schedule_id": schedule_id, "scheduled_for": p.instance.at, "now": now})
                    for p in planned
                ]
                added += connection.executemany(self._sql["rearm_skipped"], rearm).rowcount
        return max(added, 0)

    def due_schedules(self, now: datetime, jobs: Collection[str], limit: int) -> list[Schedule]:
        params = {"now": to_micros(now), "jobs": json.dumps(sorted(jobs)), "limit": limit}
        with self._connect() as connection:
            cursor = connection.execute(self._sql["due_schedules"], params)
            return [_schedule(cursor, row) for row in cursor.fetchall()]

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
                connection.execute(
                    self._sql["mark_invalid"],
                    _bind({"schedule_id": found["id"], "reason": reason, "now": now}),
                )
                if found["next_run_at"] is not None:
                    invalid = claiming.invalid_occurrence_params(
                        found["id"], params["tenant"], found["next_run_at"], reason, now
                    )
                    connection.execute(self._sql["insert_occurrence"], _bind(invalid))
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
            admitted = self._admit_serial(connection, now, due, limit, reclaim, serial_jobs, skip)
            if len(admitted) < limit:
                free = set(jobs) - serial_jobs
                admitted += self._candidates(
                    connection, "claim_free", free, now, due, limit - len(admitted), False
                )
            if not admitted:
                return []
            (last,) = connection.execute(
                self._sql["take_fences"], {"count": len(admitted)}
            ).fetchone()
            first = last - len(admitted) + 1
            until, at = to_micros(now + lease), to_micros(now)
            connection.executemany(
                self._sql["start_attempts"],
                [
                    {"id": c.occurrence_id, "fence": first + n, "owner": owner, "until": until,
                     "now": at}
                    for n, c in enumerate(admitted)
                ],
            )  # fmt: skip
            ids = json.dumps([c.occurrence_id for c in admitted])
            reclaimed = {c.occurrence_id for c in admitted if c.reclaimed}
            cursor = connection.execute(self._sql["select_claimed"], {"ids": ids})
            return [
                claiming.claim(_claimed_values(cursor, row), reclaimed) for row in cursor.fetchall()
            ]

    def _admit_serial(
        self,
        connection: sqlite3.Connection,
        now: datetime,
        due: datetime,
        limit: int,
        reclaim: Collection[str],
        serial_jobs: Collection[str],
        skip: Collection[str],
    ) -> list[claiming.Candidate]:
        """Expired leases to rerun and occurrences of serial jobs to start
        (`claiming.admit_in_rounds`); the caller holds the write lock, so nothing is locked."""

        def read(seen: Sequence[int], first: bool) -> tuple[list[claiming.Candidate], bool]:
            ready = self._candidates(
                connection, "claim_ready", serial_jobs, now, due, limit, False, seen
            )
            expired = []
            if first:
                expired = self._candidates(
                    connection, "claim_expired", reclaim, now, now, limit, True
                )
            return [*expired, *ready], len(ready) < limit

        def settle(
            candidates: list[claiming.Candidate], fresh: list[int]
        ) -> tuple[list[claiming.Candidate], set[int]]:
            busy: set[int] = set()
            if any(c.job in serial_jobs for c in candidates):
                busy = {
                    row[0]
                    for row in connection.execute(
                        self._sql["busy_schedules"],
                        {"ids": json.dumps(fresh), "now": to_micros(now)},
                    )
                }
            overlapped = claiming.overlapped(candidates, skip, busy, now)
            if overlapped:
                connection.execute(
                    self._sql["skip_overlapped"],
                    {
                        "ids": json.dumps([c.occurrence_id for c in overlapped]),
                        "reason": claiming.OVERLAP_SKIP_REASON,
                        "now": to_micros(now),
                    },
                )
            return candidates, busy

        return claiming.admit_in_rounds(limit, serial_jobs, read, settle)

    def _candidates(
        self,
        connection: sqlite3.Connection,
        name: str,
        jobs: Collection[str],
        now: datetime,
        due: datetime,
        limit: int,
        reclaimed: bool,
        exclude: Sequence[int] = (),
    ) -> list[claiming.Candidate]:
        if not jobs:
            return []
        params = {
            "now": to_micros(now),
            "due_by": to_micros(due),
            "jobs": json.dumps(sorted(jobs)),
            "limit": limit,
            "exclude": json.dumps(list(exclude)),
        }
        return [_candidate(row, reclaimed) for row in connection.execute(self._sql[name], params)]

    def abandon_expired(
        self, *, now: datetime, jobs: Collection[str], reason: str
    ) -> list[Abandoned]:
        if not jobs:
            return []
        params = {"now": to_micros(now), "jobs": json.dumps(sorted(jobs))}
        with self._connect() as connection:
            cursor = connection.execute(self._sql["expired_of_jobs"], params)
            found = [_values(cursor, row) for row in cursor.fetchall()]
        if not found:
            return []  # the usual case: no write lock taken on every tick for nothing
        abandoned = []
        with self._write() as connection:
            for values in found:
                # Conditional on what was read: read outside the write lock, the row may since
                # have been abandoned by another process, or its lease extended by its worker.
                change = _bind(
                    {"id": values["id"], "fence": values["fence"], "now": now, "reason": reason}
                )
                if connection.execute(self._sql["abandon"], change).rowcount:
                    abandoned.append(records.abandoned(values))
        return abandoned

    def extend_leases(self, leases: Sequence[tuple[Claim, datetime]]) -> set[int]:
        if not leases:
            return set()
        triples = [[c.occurrence_id, c.fence, to_micros(until)] for c, until in leases]
        params = {"leases": json.dumps(triples)}
        with self._write() as connection:
            return {row[0] for row in connection.execute(self._sql["extend_leases"], params)}

    def book_success(
        self, claims: Sequence[Claim], now: datetime, *, within: Any = None
    ) -> list[Claim]:
        if not claims:
            return []
        if within is not None:
            return self._book_success(within, claims, now)
        with self._write() as connection:
            return self._book_success(connection, claims, now)

    def _book_success(
        self, connection: sqlite3.Connection, claims: Sequence[Claim], now: datetime
    ) -> list[Claim]:
        pairs = json.dumps([[c.occurrence_id, c.fence] for c in claims])
        params = {"claims": pairs, "now": to_micros(now)}
        booked_ids = {row[0] for row in connection.execute(self._sql["book_success"], params)}
        booked = [c for c in claims if c.occurrence_id in booked_ids]
        streaks = sorted({c.schedule_id for c in booked if c.failure_streak})
        if streaks:
            connection.execute(self._sql["reset_failures"], {"ids": json.dumps(streaks)})
        return booked

    def book_skipped(self, claim: Claim, now: datetime, reason: str) -> bool:
        params = {"id": claim.occurrence_id, "fence": claim.fence, "now": now, "reason": reason}
        with self._write() as connection:
            return (
                connection.execute(self._sql["book_skipped"], _bind(params)).fetchone() is not None
            )

    def book_failure(
        self,
        claim: Claim,
        now: datetime,
        *,
        error: str,
        retry_at: datetime | None,
        pause_after: int | None,
    ) -> Failure:
        params = {"id": claim.occurrence_id, "fence": claim.fence, "now": now, "error": error}
        with self._write() as connection:
            if retry_at is not None:
                row = connection.execute(
                    self._sql["book_retry"], _bind({**params, "retry_at": retry_at})
                ).fetchone()
                return Failure(booked=row is not None, final=False)
            row = connection.execute(self._sql["book_failed"], _bind(params)).fetchone()
            if row is None:
                return Failure(booked=False, final=True)
            count = {"schedule_id": row[0], "pause_after": pause_after, "now": to_micros(now)}
            failures, paused = connection.execute(self._sql["count_failure"], count).fetchone()
        return Failure(booked=True, final=True, consecutive_failures=failures, paused=bool(paused))

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

    def next_due_at(
        self, jobs: Collection[str] | None = None, *, after: datetime | None = None
    ) -> datetime | None:
        params = {
            "jobs": None if jobs is None else json.dumps(sorted(jobs)),
            "after": None if after is None else to_micros(after),
        }
        with self._connect() as connection:
            schedule = connection.execute(self._sql["next_schedule_due"], params).fetchone()[0]
            found = connection.execute(self._sql["next_occurrence_due"], params).fetchone()
            occurrence = None if found is None else found[0]
        due = [from_micros(v) for v in (schedule, occurrence) if v is not None]
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
            "all_tenants": int(all_tenants),
            "key": key,
            "since": since,
            "until": until,
            "status": status,
            "limit": limit,
        }
        with self._connect() as connection:
            cursor = connection.execute(self._sql["select_history"], _bind(params))
            return [records.occurrence(_values(cursor, row)) for row in cursor.fetchall()]

    def _row(
        self, connection: sqlite3.Connection, name: str, params: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        cursor = connection.execute(self._sql[name], _bind(params))
        row = cursor.fetchone()
        return None if row is None else _values(cursor, row)

    def _one(
        self, connection: sqlite3.Connection, name: str, params: Mapping[str, Any]
    ) -> Schedule | None:
        cursor = connection.execute(self._sql[name], _bind(params))
        row = cursor.fetchone()
        return None if row is None else _schedule(cursor, row)

    def acquire_lease(self, name: str, owner: str, ttl: timedelta, now: datetime) -> Lease | None:
        with self._write() as connection:
            (token,) = connection.execute(self._sql["take_lease_token"]).fetchone()
            params = {"name": name, "owner": owner, "until": now + ttl, "now": now, "token": token}
            found = self._row(connection, "acquire_lease", params)
        return None if found is None else housekeeping.lease(found)

    def renew_lease(self, lease: Lease, until: datetime) -> Lease | None:
        params = {**housekeeping.lease_params(lease), "until": until}
        with self._write() as connection:
            found = self._row(connection, "renew_lease", params)
        return None if found is None else housekeeping.lease(found)

    def release_lease(self, lease: Lease) -> bool:
        params = _bind(housekeeping.lease_params(lease))
        with self._write() as connection:
            return connection.execute(self._sql["release_lease"], params).fetchone() is not None

    def lease_holder(self, name: str, now: datetime) -> Lease | None:
        with self._connect() as connection:
            found = self._row(connection, "lease_holder", {"name": name, "now": now})
        return None if found is None else housekeeping.lease(found)

    def see_code_version(
        self, fingerprint: str, now: datetime
    ) -> tuple[CodeVersion, CodeVersion | None]:
        params = {"fingerprint": fingerprint, "now": now}
        with self._write() as connection:
            mine = self._row(connection, "see_code_version", params)
            applied = self._row(connection, "applied_code_version", {})
        assert mine is not None
        return CodeVersion(**mine), None if applied is None else CodeVersion(**applied)

    def mark_code_applied(self, fingerprint: str, now: datetime) -> None:
        with self._write() as connection:
            self._row(connection, "mark_code_applied", {"fingerprint": fingerprint, "now": now})

    def database_now(self) -> datetime | None:
        return None

    def beat(self, worker: WorkerBeat) -> None:
        with self._write() as connection:
            connection.execute(self._sql["beat_worker"], _bind(asdict(worker)))

    def forget_worker(self, name: str) -> None:
        with self._write() as connection:
            connection.execute(self._sql["forget_worker"], {"name": name})

    def forget_silent_workers(self, before: datetime) -> int:
        with self._write() as connection:
            gone = connection.execute(self._sql["forget_silent_workers"], _bind({"before": before}))
            return gone.rowcount

    def workers(self, limit: int = 100) -> list[WorkerBeat]:
        with self._connect() as connection:
            cursor = connection.execute(self._sql["select_workers"], {"limit": limit})
            return [records.worker(_values(cursor, row)) for row in cursor.fetchall()]

    def record_sweep(self, sweep: Sweep) -> None:
        with self._write() as connection:
            connection.execute(self._sql["insert_sweep"], _bind(housekeeping.sweep_params(sweep)))

    def running(self, limit: int = 1000) -> list[Occurrence]:
        with self._connect() as connection:
            cursor = connection.execute(self._sql["select_running"], {"limit": limit})
            return [records.occurrence(_values(cursor, row)) for row in cursor.fetchall()]

    def job_counts(self) -> dict[str, int]:
        with self._connect() as connection:
            rows = connection.execute(self._sql["job_counts"]).fetchall()
        return {job: count for job, count in rows}

    def retry_failed(
        self, tenant: str | None, key: str, scheduled_for: datetime, now: datetime
    ) -> bool:
        params = {"tenant": tenant_column(tenant), "key": key, "scheduled_for": scheduled_for}
        with self._write() as connection:
            found = self._row(connection, "retry_failed", {**params, "now": now})
        return found is not None

    def record_action(self, action: Action) -> None:
        with self._write() as connection:
            connection.execute(
                self._sql["insert_action"], _bind(housekeeping.action_params(action))
            )

    def actions(self, tenant: str | None, key: str | None, limit: int = 50) -> list[Action]:
        params = _bind({"tenant": tenant_column(tenant), "key": key, "limit": limit})
        with self._connect() as connection:
            cursor = connection.execute(self._sql["select_actions"], params)
            return [housekeeping.action(_values(cursor, row)) for row in cursor.fetchall()]

    def code_versions(self, limit: int = 20) -> list[CodeVersion]:
        with self._connect() as connection:
            cursor = connection.execute(self._sql["list_code_versions"], {"limit": limit})
            found = [_values(cursor, row) for row in cursor.fetchall()]
        return [CodeVersion(**row) for row in found]

    def leases(self, limit: int = 1000) -> list[Lease]:
        with self._connect() as connection:
            params = _bind({"limit": limit, "released": housekeeping.RELEASED})
            cursor = connection.execute(self._sql["list_leases"], params)
            return [housekeeping.lease(_values(cursor, row)) for row in cursor.fetchall()]

    def sweeps(self, limit: int = 20) -> list[Sweep]:
        with self._connect() as connection:
            cursor = connection.execute(self._sql["select_sweeps"], {"limit": limit})
            return [housekeeping.sweep(_values(cursor, row)) for row in cursor.fetchall()]

    def history_horizon(self) -> datetime | None:
        with self._connect() as connection:
            row = connection.execute(self._sql["history_horizon"]).fetchone()
        return None if row is None else from_micros(row[0])

    def prune(self, before: datetime, limit: int) -> int:
        params = {"before": to_micros(before), "limit": limit}
        with self._write() as connection:
            pruned = connection.execute(self._sql["prune_occurrences"], params).rowcount
            connection.execute(self._sql["raise_history_horizon"], {"before": params["before"]})
            connection.execute(self._sql["prune_keyless_schedules"], params)
            connection.execute(self._sql["prune_sweeps"], {"before": params["before"]})
            connection.execute(self._sql["prune_actions"], {"before": params["before"]})
        return max(pruned, 0)

    def reclaim_expired(self, now: datetime, retries: Mapping[str, int]) -> list[Reclaimed]:
        if not retries:
            return []
        params = {"now": to_micros(now), "jobs": json.dumps(sorted(retries))}
        with self._connect() as connection:
            cursor = connection.execute(self._sql["reclaimable"], params)
            found = [_values(cursor, row) for row in cursor.fetchall()]
        if not found:
            return []  # the usual case: no write lock taken for nothing
        done: list[Reclaimed] = []
        with self._write() as connection:
            for values in found:
                # Conditional on what was read: a claim may have taken the row over since.
                decided = housekeeping.reclaim(values, retries[values["job"]], now)
                changed = connection.execute(self._sql["reclaim"], _bind(decided.params)).fetchone()
                if changed is None:
                    continue
                if decided.report.status == "failed":
                    count = {"schedule_id": changed[0], "pause_after": None, "now": params["now"]}
                    connection.execute(self._sql["count_failure"], count).fetchone()
                done.append(decided.report)
        return done

    def fail_orphaned(
        self, now: datetime, jobs: Collection[str], lost_before: datetime
    ) -> list[Abandoned]:
        params = _bind({"jobs": json.dumps(sorted(jobs)), "lost_before": lost_before})
        with self._write() as connection:
            cursor = connection.execute(self._sql["orphaned"], params)
            found = [_values(cursor, row) for row in cursor.fetchall()]
            failed = [
                values
                for values in found
                if connection.execute(
                    self._sql["fail_orphan"], _bind(housekeeping.orphan_params(values, now))
                ).rowcount
            ]
        return [records.abandoned(values) for values in failed]

    def release(self, claims: Sequence[Claim], now: datetime) -> int:
        if not claims:
            return 0
        pairs = json.dumps([[c.occurrence_id, c.fence] for c in claims])
        with self._write() as connection:
            rows = connection.execute(self._sql["release_claims"], {"claims": pairs}).fetchall()
        return len(rows)

    def mark_left_running(self, claims: Sequence[Claim], reason: str) -> int:
        if not claims:
            return 0
        pairs = json.dumps([[c.occurrence_id, c.fence] for c in claims])
        with self._write() as connection:
            rows = connection.execute(
                self._sql["mark_left_running"], {"claims": pairs, "reason": reason}
            ).fetchall()
        return len(rows)

    def watch(self, on_change: Callable[[], None], *, outcomes: bool = False) -> Watch | None:
        return None

    def reserve(self, users: int) -> None:
        """Nothing to do: each thread has its own connection."""

    def close(self) -> None:
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for _, connection in opened:
            connection.close()
        self._local = threading.local()


def _schedule(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Schedule:
    return _schedule_of(_values(cursor, row))


def _same_file(theirs: str, ours: str) -> bool:
    try:
        return os.path.samefile(theirs, ours)
    except OSError:
        return False


def _schedule_of(values: dict[str, Any]) -> Schedule:
    values["trigger_spec"] = payloads.decode(values["trigger_spec"])
    values["payload"] = payloads.decode(values["payload"])
    return records.schedule(values)


def _claimed_values(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    values = _values(cursor, row)
    values["payload"] = payloads.decode(values["payload"])
    return values


def _candidate(row: tuple[Any, ...], reclaimed: bool) -> claiming.Candidate:
    occurrence_id, schedule_id, job, *more = row
    if not more:
        return claiming.Candidate(occurrence_id, schedule_id, job, reclaimed)
    run_after, ahead = more
    return claiming.Candidate(
        occurrence_id, schedule_id, job, reclaimed, bool(ahead), from_micros(run_after)
    )
