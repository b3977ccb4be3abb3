"""PostgreSQL connections for `PostgresStore`: the pool, outages, and callers' connections."""

from __future__ import annotations

import json
import logging
import os
import select
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool, PoolTimeout

from oncely.errors import ConfigurationError, StoreError, StoreUnavailable
from oncely.store import payloads
from oncely.store.queries import queries

# How long a call waits for a connection, and a connection attempt for the server, before the
# store says it is unavailable: the worker must hear of an outage in seconds, not hang in it.
TIMEOUT_S = 5

# The change watch's connection idles between notices; keepalives notice a server that vanished
# without closing it (a cut network), which would otherwise leave the watch waiting forever.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 60,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}

# A caller's wait for a pooled connection is cut into slices this long. An outage empties the
# pool, whose one attempt to connect fails; a caller waiting then heard nothing until TIMEOUT_S
# had passed, even once the server was back, and was told the pool's connections were in use.
_WAIT_SLICE_S = 0.5

Connection = psycopg.Connection[dict[str, Any]]

_POOL_NAME = "oncely"


def _decode_safely(connection: Connection) -> None:
    """Decode jsonb (payloads, trigger specs) with `payloads.decode`: a stored value too deep for
    this process's recursion room raised RecursionError from every read of its row."""
    set_json_loads(payloads.decode, connection)


class _OwnPoolWarnings(logging.Filter):
    """Drops psycopg_pool's warnings about oncely's own pool; others' pools are left alone.

    While the server is down the pool warned of every failed connection attempt, several a
    second, against lesson 10's one line per 30 repeats: the worker reports the outage itself.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not isinstance(record.args, tuple):
            return True
        for arg in record.args:
            pool = getattr(arg, "_pool", None) or getattr(arg, "pool", None)
            if arg == _POOL_NAME or getattr(pool, "name", None) == _POOL_NAME:
                return False
        return True


logging.getLogger("psycopg.pool").addFilter(_OwnPoolWarnings())


class PostgresConnections:
    """How `PostgresStore` reaches its database: a pool of at most ``max_size`` connections,
    opened on first use in the process that uses it, and the connections callers pass in."""

    def __init__(self, conninfo: str, max_size: int = 8) -> None:
        self.conninfo = conninfo
        self.max_size = max_size
        self._pool: ConnectionPool[Connection] | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()
        self._own_identity: tuple[Any, ...] | None = None

    def _where(self) -> str:
        """``user@host:port/dbname`` of the conninfo, for messages: never its password."""
        try:
            parts = conninfo_to_dict(self.conninfo)
        except psycopg.Error:
            return "(an unreadable conninfo)"
        user = f"{parts['user']}@" if parts.get("user") else ""
        port = f":{parts['port']}" if parts.get("port") else ""
        return f"{user}{parts.get('host') or 'localhost'}{port}/{parts.get('dbname') or ''}"

    def _direct(self, *, autocommit: bool) -> Connection:
        """One connection of its own, outside the pool. A database that cannot be reached fails
        at once, with psycopg's reason: through the pool it failed after the pool's 5 s wait
        with "couldn't get a connection after 5.00 sec", whatever the cause (no such database,
        connection refused, a wrong password)."""
        try:
            connection = psycopg.connect(
                self.conninfo,
                autocommit=autocommit,
                connect_timeout=TIMEOUT_S,
                row_factory=dict_row,
            )
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {self._where()}: {reason}"
            ) from exc
        _decode_safely(connection)
        return connection

    def _probe(self) -> None:
        self._direct(autocommit=True).close()

    def _why_no_connection(self) -> StoreUnavailable:
        """Why the pool handed out no connection within its wait. The pool says only "couldn't
        get a connection after 5.00 sec", whatever the cause; one direct connection tells a
        server that refuses (no such database, too many clients, restarting) from a pool whose
        connections were all in use."""
        try:
            self._probe()
        except StoreUnavailable as refused:
            return refused
        return StoreUnavailable(
            f"cannot connect to PostgreSQL at {self._where()}: this process's pool of "
            f"{self.max_size} connection(s) stayed in use for {TIMEOUT_S} s, and the server "
            "accepts new ones; "
            "handlers holding run.connection for long, or more threads calling oncely than the "
            "pool holds, keep the others waiting"
        )

    def _opened_pool(self) -> ConnectionPool[Connection]:
        with self._pool_lock:
            if self._pool is None or self._pool_pid != os.getpid():
                # The first connection, made here to fail at once with its reason, is the
                # pool's first: a probe closed after cost every worker start a connection.
                handover = [self._direct(autocommit=False)]
                check = _IdleCheck()
                self._pool = ConnectionPool(
                    self.conninfo,
                    connection_class=_first_from(handover),
                    min_size=1,
                    max_size=self.max_size,
                    open=False,
                    timeout=TIMEOUT_S,
                    # A failed connection attempt is given up at once, not retried in the
                    # background: a call made once the server was back waited for the pool's
                    # next retry in its backoff, and past TIMEOUT_S it failed. Given up, every
                    # call that finds no connection asks for one itself.
                    reconnect_timeout=0,
                    check=check,
                    kwargs={"connect_timeout": TIMEOUT_S, "row_factory": dict_row},
                    configure=_decode_safely,
                    name=_POOL_NAME,
                )
                check.pool = weakref.ref(self._pool)
                self._pool.open(wait=False)
                self._pool_pid = os.getpid()
            return self._pool

    def reserve(self, users: int) -> None:
        with self._pool_lock:
            if users <= self.max_size:
                return
            self.max_size = users
            if self._pool is not None and self._pool_pid == os.getpid():
                self._pool.resize(min_size=self._pool.min_size, max_size=users)

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        """A pooled connection in one transaction: committed at the end, rolled back on error."""
        pool = self._opened_pool()
        try:
            connection = self._take(pool)
            try:
                with connection:
                    yield connection
            finally:
                pool.putconn(connection)
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    def _take(self, pool: ConnectionPool[Connection]) -> Connection:
        """A connection from ``pool`` within TIMEOUT_S. A pool left with no connection at all
        (its attempt to connect failed) is not waited on: the server's refusal is raised, and a
        server back again is asked by the next attempt at once."""
        deadline = time.monotonic() + TIMEOUT_S
        wait = _WAIT_SLICE_S
        while True:
            left = deadline - time.monotonic()
            try:
                return pool.getconn(timeout=max(0.01, min(wait, left)))
            except PoolTimeout as exc:
                if left <= wait:
                    raise self._why_no_connection() from exc
                if pool.get_stats()["pool_size"] == 0:
                    self._probe()
                else:
                    # In use: wait for one in a single place in the queue, behind no newcomer.
                    wait = TIMEOUT_S

    @contextmanager
    def _session(self) -> Iterator[Connection]:
        """A connection of its own, outside the pool, in autocommit: closed at the end, which
        ends whatever it holds (session locks included)."""
        try:
            with self._direct(autocommit=True) as connection:
                yield connection
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    def _reading(self) -> AbstractContextManager[Connection]:
        return self._connect()

    @contextmanager
    def _writing(self, within: Any = None) -> Iterator[Connection]:
        """A pooled connection in a transaction of its own, or ``within``, the caller's, in the
        caller's transaction, never committed here."""
        if within is None:
            with self._connect() as connection:
                yield connection
            return
        connection = self._adopted(within)
        try:
            yield connection
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    def _cursor_on(self, connection: Connection) -> psycopg.Cursor[dict[str, Any]]:
        """A cursor reading rows as the store does, also on a caller's connection (whose row
        factory and JSON loader are the caller's, and stay so)."""
        if connection not in _identities:
            return connection.cursor()
        cursor = connection.cursor(row_factory=dict_row)
        set_json_loads(payloads.decode, cursor)
        return cursor

    def _adopted(self, within: Any) -> Connection:
        """``within``, a caller's psycopg connection, once it is known to be in a transaction on
        this store's database; else `ConfigurationError` saying what is wrong."""
        if not isinstance(within, psycopg.Connection):
            raise ConfigurationError(
                f"connection={within!r} is not a psycopg connection, and this app's database is "
                "PostgreSQL; pass a psycopg 3 connection (or cursor), a SQLAlchemy Connection or "
                "Session, or Django's connection, open on the app's database"
            )
        status = within.info.transaction_status
        if status == TransactionStatus.INERROR:
            raise ConfigurationError(
                "connection= is in a failed transaction; roll it back before scheduling on it"
            )
        if within.closed or status == TransactionStatus.UNKNOWN:
            raise ConfigurationError("connection= is closed; pass an open connection")
        if status == TransactionStatus.IDLE and within.autocommit:
            # Each statement would commit on its own: a rollback of the caller's could not
            # take the timer back.
            raise ConfigurationError(
                "connection= is in autocommit mode and in no transaction, so oncely's writes "
                "would commit on their own; open one first (with connection.transaction(): ...)"
            )
        theirs = _identities.get(within)
        if theirs is None:
            theirs = _identities[within] = _identity(within)
        if theirs != self._identity():
            raise ConfigurationError(
                f"connection= is on database {theirs[0]!r} (server port {theirs[2]}, schema "
                f"{theirs[3]!r}), not on this app's ({self._identity()[0]!r}, port "
                f"{self._identity()[2]}, schema {self._identity()[3]!r}): oncely writes its "
                "timers only on its own database; pass a connection to that one"
            )
        return within

    def _identity(self) -> tuple[Any, ...]:
        if self._own_identity is None:
            with self._connect() as connection:
                self._own_identity = _identity(connection)
        return self._own_identity

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self._connect() as connection:
            set_json_loads(json.loads, connection)  # the caller's own queries decode as psycopg's
            try:
                yield connection
            finally:
                _decode_safely(connection)

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pool_pid == os.getpid():
            pool.close()


def _first_from(handover: list[Connection]) -> type[Connection]:
    """A connection class for the pool whose ``connect`` returns the connections in
    ``handover`` first; every connection it makes is a plain `psycopg.Connection`, as handlers
    see ``run.connection``."""

    class FirstHandedOver(psycopg.Connection[dict[str, Any]]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
            try:
                return handover.pop()
            except IndexError:
                return psycopg.Connection.connect(conninfo, **kwargs)

    return FirstHandedOver


def store_error(exc: psycopg.Error) -> StoreError:
    """``exc`` as oncely says it: `StoreUnavailable` for an operational error (a lost
    connection, a server shutting down), else `StoreError`."""
    if isinstance(exc, psycopg.OperationalError):
        return StoreUnavailable(f"PostgreSQL: {exc}")
    return StoreError(f"PostgreSQL refused: {exc}")


class _IdleCheck:
    """The pool's check before it hands a connection out: one poll of its socket, no round trip.

    An idle connection has nothing to read unless the server closed it (a restart, a cut). Such a
    connection is closed, and the pool drained, since every idle connection went to that same
    server; raising makes the pool take another, or open a new one. It holds its pool weakly: a
    store dropped without `close` must not stay alive, connected, through a reference cycle.
    """

    def __init__(self) -> None:
        self.pool: weakref.ref[ConnectionPool[Connection]] | None = None

    def __call__(self, connection: Connection) -> None:
        if connection.closed or _readable(connection.fileno()):
            connection.close()
            pool = self.pool() if self.pool is not None else None
            if pool is not None:
                pool.drain()
            raise StoreUnavailable("PostgreSQL closed an idle connection")


# The server identity of each caller's connection seen, asked once per connection. A
# connection in it is a caller's: its row factory and JSON loader are the caller's own.
_identities: weakref.WeakKeyDictionary[Connection, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def _identity(connection: Connection) -> tuple[Any, ...]:
    """Which database ``connection`` is on: name, server (by its start time), port, schema."""
    row = connection.cursor(row_factory=dict_row).execute(queries("postgres")["identity"])
    found = row.fetchone()
    assert found is not None
    return (found["db"], found["started"], found["port"], found["schema"])


def _readable(fd: int) -> bool:
    """True when socket ``fd`` has something to read (or its peer hung up), without waiting."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))
