"""SQLite connections for `SqliteStore`: one per thread, the write lock, callers' connections."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any

from oncely.errors import ConfigurationError, StoreError, StoreUnavailable

BUSY_TIMEOUT_S = 30.0

# The transaction open in this context (thread, or async handler's task): the store's own calls
# made inside it join it. Opening a second one waited 30 s on its own write lock, then failed.
current_transaction: ContextVar[tuple[SqliteConnections, sqlite3.Connection] | None] = ContextVar(
    "oncely_sqlite_joined", default=None
)

_CACHE_KIB = 64 * 1024


@contextmanager
def in_transaction(connection: sqlite3.Connection, begin: str) -> Iterator[None]:
    """Run the block in one transaction opened by ``begin``; commit, or roll back and re-raise."""
    connection.execute(begin)
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def statements(script: str) -> Iterator[str]:
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


def use_wal(connection: sqlite3.Connection) -> None:
    """Switch the file to WAL, waiting out another connection doing the same.

    Switching a new file to WAL needs it to itself, and SQLite answers "database is locked" at
    once rather than through the busy timeout: without this wait, the second of two processes
    starting on a new file failed.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
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


class TransactionCut:
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


class SqliteConnections:
    """How `SqliteStore` reaches its file: a connection per thread, write transactions under
    the one write lock, and the connections callers pass in."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()
        # Each open connection with the thread that opened it.
        self._opened: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._opened_lock = threading.Lock()
        self._pid = os.getpid()

    def _open(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False
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
        joined = current_transaction.get()
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
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc

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
            except sqlite3.Error as exc:
                raise self._store_error(exc) from exc
            return
        joined = current_transaction.get()
        if joined is None or joined[0] is not self:
            with self._connect() as connection, in_transaction(connection, "BEGIN IMMEDIATE"):
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

    def _store_error(self, exc: sqlite3.Error) -> StoreError:
        """``exc`` as oncely says it: `StoreUnavailable` for an operational error (locked,
        unreachable, disk), else `StoreError`."""
        if isinstance(exc, sqlite3.OperationalError):
            return StoreUnavailable(f"SQLite database {self.path!r}: {exc}")
        return StoreError(f"SQLite database {self.path!r} refused: {exc}")

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

    def _reading(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._connect()

    def _writing(self, within: Any = None) -> AbstractContextManager[sqlite3.Connection]:
        return self._write(within)

    def reserve(self, users: int) -> None:
        """Nothing to do: each thread has its own connection."""

    def close(self) -> None:
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for _, connection in opened:
            connection.close()
        self._local = threading.local()


def _same_file(theirs: str, ours: str) -> bool:
    try:
        return os.path.samefile(theirs, ours)
    except OSError:
        return False
