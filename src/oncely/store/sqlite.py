"""The embedded store: SQLite from the standard library, in WAL mode."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from oncely.errors import TransactionTooLong
from oncely.model import Claim, Claims, Lease
from oncely.store import claiming, housekeeping, records
from oncely.store.bookings import final_cuts
from oncely.store.dialect import Row
from oncely.store.interface import Watch
from oncely.store.queries import migrations, queries
from oncely.store.sqlite_connections import (
    TransactionCut,
    current_transaction,
    in_transaction,
    statements,
    use_wal,
)
from oncely.store.sqlite_schedules import SqliteSchedules
from oncely.store.sqlite_values import bound, decoded, to_micros

#: Longest a `transaction` (a transactional handler's) may hold the one write lock: every other
#: writer, heartbeats and bookings included, waits for it. Past it the transaction is rolled
#: back, the lock freed, and the block raises `TransactionTooLong`.
TRANSACTION_MAX_S = 10.0

#: Rows `SqliteStore.prune` deletes per write transaction.
PRUNE_BATCH = 200


class SqliteStore(SqliteSchedules):
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
                        self._sql["record_migration"], bound({**record, "applied_at": now})
                    )
                    applied.append(migration.version)
        return applied

    def schema_version(self) -> int:
        with self._connect() as connection:
            if connection.execute(self._sql["migrations_table_exists"]).fetchone() == (0,):
                return 0
            versions = [row[0] for row in connection.execute(self._sql["applied_versions"])]
        return max(versions, default=0)

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

    def prune(
        self, before: datetime, limit: int, *, by_status: Mapping[str, datetime] | None = None
    ) -> int:
        """See `Store.prune`. In batches of at most `PRUNE_BATCH` rows, each its own write
        transaction: other writers (claims, heartbeats, bookings) get the one write lock in
        between, instead of waiting out the whole call."""
        cuts = final_cuts(before, by_status)
        pruned = 0
        while True:
            batch = min(PRUNE_BATCH, limit - pruned)
            with self._write() as connection:
                deleted = self._prune_occurrences(connection, cuts, batch)
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

    def tell_outcomes(self) -> None:
        """Nothing: the dashboard polls SQLite."""

    def _rows(self, connection: Any, name: str, params: Mapping[str, Any]) -> list[Row]:
        return decoded(connection.execute(self._sql[name], bound(params)))

    def _ids(self, connection: Any, name: str, params: Mapping[str, Any]) -> set[int]:
        return {row[0] for row in connection.execute(self._sql[name], bound(params))}

    def _changed(self, connection: Any, name: str, params: Mapping[str, Any]) -> int:
        changed: int = connection.execute(self._sql[name], bound(params)).rowcount
        return changed

    def _changed_each(self, connection: Any, name: str, params: Sequence[Mapping[str, Any]]) -> int:
        if not params:
            return 0
        changed: int = connection.executemany(self._sql[name], map(bound, params)).rowcount
        return changed

    def _keep_attempt(self, connection: Any, occurrence_id: int, outcome: str) -> None:
        params = {"id": occurrence_id, "outcome": outcome, "kept": records.ATTEMPTS_KEPT}
        self._changed(connection, "keep_attempt", params)

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
