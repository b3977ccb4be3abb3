"""PostgreSQL through an outage: calls fail within seconds, and the same store recovers after it.

The worker must ride out a database restart or cut connections without being restarted itself.
The outage is made by a proxy in front of the server (tests/_proxy.py), never by stopping it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, suppress

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from _proxy import TcpProxy, proxied
from oncely.errors import StoreUnavailable
from oncely.store import PostgresStore

FAIL_WITHIN_S = 6.5  # the store's 5 s wait, and some slack on a busy machine
REFUSED_WITHIN_S = 4.0  # its 0.5 s wait on an empty pool, and the slack


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[tuple[TcpProxy, str]]:
    """A proxy in front of the test database, and the URL that goes through it."""
    with proxied(postgres_url) as made:
        yield made


def busy(store: PostgresStore, connections: int) -> None:
    """Leave ``connections`` idle connections in the store's pool, as a busy worker does."""
    with ExitStack() as stack:
        for _ in range(connections):
            stack.enter_context(store.transaction())


def fails_fast(store: PostgresStore) -> None:
    """A call in an outage is told the server refuses, without waiting out the pool. The outage
    empties the pool and its one attempt to connect fails: a call then waited all of the
    pool's 5 s and, the server being back by then, was told the pool's connections were in use
    (and kept the worker's tick waiting that long)."""
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as raised:
        store.next_due_at()
    assert time.monotonic() - started < REFUSED_WITHIN_S
    assert "cannot connect to PostgreSQL" in str(raised.value), raised.value


def test_calls_fail_fast_in_an_outage_and_succeed_after_it(proxy: tuple[TcpProxy, str]) -> None:
    # Three calls, as a worker retrying every few seconds makes: long enough for the pool's own
    # reconnection backoff (growing to minutes) to have delayed the recovery, had it been kept.
    cutter, url = proxy
    store = PostgresStore(url)
    try:
        assert store.next_due_at() is None
        cutter.cut()
        for _ in range(3):
            fails_fast(store)
        cutter.restore()
        started = time.monotonic()
        assert store.next_due_at() is None
        assert time.monotonic() - started < 2.0  # not a wait for the pool's next retry
        for _ in range(5):  # every call, not only the first
            assert store.next_due_at() is None
    finally:
        store.close()


def call_in_the_outage(store: PostgresStore) -> None:
    """One call begun in the outage: it fails, or it is served once the server is back."""
    with suppress(StoreUnavailable):
        store.next_due_at()


def test_a_call_once_the_server_is_back_does_not_wait_for_a_retry_in_backoff(
    proxy: tuple[TcpProxy, str],
) -> None:
    # A call in the outage leaves the pool's attempts for it failed. Retried in the background
    # with a backoff (after 1 s, then 2 more, ...), they kept the pool from trying again for the
    # next call: made once the server was back, it waited for the next retry (past 5 s it
    # failed, as make test saw under load).
    cutter, url = proxy
    store = PostgresStore(url)
    try:
        assert store.next_due_at() is None
        cutter.cut()
        during = threading.Thread(target=call_in_the_outage, args=(store,))
        during.start()
        time.sleep(1.3)  # its connection attempts have failed twice: the next, 2 s later
        cutter.restore()
        started = time.monotonic()
        assert store.next_due_at() is None
        assert time.monotonic() - started < 1.0
        during.join(timeout=10)
    finally:
        store.close()


def test_connections_broken_while_idle_are_not_handed_out(proxy: tuple[TcpProxy, str]) -> None:
    # A restart between two calls: the pool's idle connections are all dead, and nobody has
    # noticed yet. The next call must still succeed.
    cutter, url = proxy
    store = PostgresStore(url)
    try:
        busy(store, 4)
        cutter.cut()
        cutter.restore()
        for _ in range(5):
            assert store.next_due_at() is None
    finally:
        store.close()


def test_a_watch_dies_with_its_connection(
    proxy: tuple[TcpProxy, str], caplog: pytest.LogCaptureFixture
) -> None:
    cutter, url = proxy
    store = PostgresStore(url)
    woken = threading.Event()
    watch = store.watch(woken.set)
    assert watch is not None
    try:
        assert watch.alive
        cutter.cut()
        assert woken.wait(5)  # told once: notices may have been missed
        deadline = time.monotonic() + 5
        while watch.alive and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not watch.alive
        warnings = [r for r in caplog.records if r.name == "oncely"]
        assert [r.levelname for r in warnings] == ["WARNING"]
        assert "\n" not in warnings[0].getMessage()
    finally:
        watch.close()
        store.close()


def test_a_database_dropped_under_the_pool_is_named_as_the_reason(postgres_url: str) -> None:
    # Before: "couldn't get a connection after 5.00 sec (the server was reachable before...)":
    # the pool waits on its own retries and keeps psycopg's reason to itself.
    store = PostgresStore(postgres_url)
    database = str(conninfo_to_dict(postgres_url)["dbname"])
    try:
        assert store.next_due_at() is None
        with psycopg.connect(make_conninfo(postgres_url, dbname="postgres"), autocommit=True) as c:
            c.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database)))
        said = []
        for _ in range(2):  # the first call may meet the connection the drop closed
            try:
                store.next_due_at()
            except StoreUnavailable as exc:
                said.append(str(exc))
        assert len(said) == 2
        assert f'database "{database}" does not exist' in said[-1], said
    finally:
        store.close()


def test_a_pool_whose_connections_are_all_held_says_so(postgres_url: str) -> None:
    # The same wait as a refusing server, said the same way before: which of the two it is
    # decides whether to look at the database or at this process's handlers.
    store = PostgresStore(postgres_url, max_size=1)
    raised: list[BaseException] = []

    def call() -> None:
        try:
            store.next_due_at()
        except StoreUnavailable as exc:
            raised.append(exc)

    try:
        with store.transaction():
            waiting = threading.Thread(target=call)
            waiting.start()
            waiting.join(timeout=FAIL_WITHIN_S + 5)
        assert len(raised) == 1, raised
        assert "this process's pool of 1 connection(s) stayed in use" in str(raised[0])
    finally:
        store.close()
