"""Lesson 3, transactional delivery: the handler's writes and the occurrence's completion commit
together, and roll back together."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from _engine_support import MakeApp

import oncely
from oncely.testing import Clock


def param(app: oncely.App) -> str:
    return "?" if app.store.dialect == "sqlite" else "%s"


def bills(app: oncely.App) -> list[Any]:
    with app.store.transaction() as connection:
        return [
            row[0] if isinstance(row, tuple) else row["key"]
            for row in connection.execute("SELECT key FROM bills ORDER BY key").fetchall()
        ]


@pytest.fixture
def billing(app: oncely.App) -> oncely.App:
    with app.store.transaction() as connection:
        connection.execute("CREATE TABLE bills (key text PRIMARY KEY)")
    return app


def test_handler_writes_commit_with_the_completion(billing: oncely.App, clock: Clock) -> None:
    app = billing

    @app.job(delivery="transactional")
    def bill(run: oncely.Run) -> None:
        run.connection.execute(f"INSERT INTO bills (key) VALUES ({param(app)})", (run.key,))

    app.defer(bill, at=clock(), key="bill:1")
    app.tick()
    assert bills(app) == ["bill:1"]
    assert [o.status for o in app.history()] == ["succeeded"]


def test_a_failing_handler_rolls_its_writes_back(billing: oncely.App, clock: Clock) -> None:
    app = billing
    attempts: list[int] = []

    @app.job(delivery="transactional")
    def bill(run: oncely.Run) -> None:
        attempts.append(run.attempt)
        run.connection.execute(f"INSERT INTO bills (key) VALUES ({param(app)})", (run.key,))
        if run.attempt == 1:
            raise RuntimeError("payment provider timed out")

    app.defer(bill, at=clock(), key="bill:1")
    app.tick()
    assert bills(app) == []
    (row,) = app.history()
    assert row.status == "retrying"
    clock.set(row.retry_at)  # type: ignore[arg-type]
    app.tick()
    assert bills(app) == ["bill:1"]  # once, by the attempt that succeeded
    assert attempts == [1, 2]


def test_a_lease_taken_over_rolls_the_writes_back(
    make_app: MakeApp, clock: Clock, url: str
) -> None:
    if url.startswith("sqlite"):
        pytest.skip("on SQLite the handler's transaction holds the write lock: no takeover")
    app, other = make_app(), make_app()
    with app.store.transaction() as connection:
        connection.execute("CREATE TABLE bills (key text PRIMARY KEY)")
    for each in (app, other):

        @each.job(delivery="transactional", lease=timedelta(minutes=1))
        def bill(run: oncely.Run) -> None:
            run.connection.execute("INSERT INTO bills (key) VALUES (%s)", (str(run.fence),))
            if run.fence == 1:  # the first worker stalls past its lease; another takes over
                clock.advance(minutes=2)
                other.tick()
                assert run.lease_lost

    app.defer("bill", at=clock(), key="bill:1")
    app.tick()
    assert bills(app) == ["2"]  # only the attempt that held the lease wrote
    (row,) = app.history()
    assert (row.status, row.attempts) == ("succeeded", 2)


def test_oncely_called_inside_a_transactional_handler_joins_its_transaction(
    billing: oncely.App, clock: Clock, url: str
) -> None:
    app = billing

    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    @app.job(delivery="transactional")
    def bill(run: oncely.Run) -> None:
        run.connection.execute(f"INSERT INTO bills (key) VALUES ({param(app)})", (run.key,))
        app.defer(remind, at=clock() + timedelta(hours=1), key=f"remind:{run.attempt}")
        assert [s.key for s in app.schedules(key_prefix="remind:")] == [f"remind:{run.attempt}"]
        if run.attempt == 1 and url.startswith("sqlite"):
            raise RuntimeError("the payment provider said no")

    app.defer(bill, at=clock(), key="bill:1")
    began = time.monotonic()
    app.tick()
    # On SQLite the defer waited 30 s for the handler's own write lock, then failed.
    assert time.monotonic() - began < 5
    if url.startswith("sqlite"):
        # Its defer rolled back with the handler's other writes.
        assert [s.key for s in app.schedules(key_prefix="remind:")] == []
        (row,) = app.history(key="bill:1")
        assert row.status == "retrying"
        assert "the payment provider said no" in (row.error or "")
        clock.set(row.retry_at)  # type: ignore[arg-type]
        app.tick()
    assert [s.key for s in app.schedules(key_prefix="remind:")] == [
        "remind:2" if url.startswith("sqlite") else "remind:1"
    ]
    assert bills(app) == ["bill:1"]
    assert app.history(key="bill:1")[0].status == "succeeded"


def test_a_transactional_handler_past_sqlite_s_bound_fails_clearly_and_frees_the_lock(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import oncely.store.sqlite

    monkeypatch.setattr(oncely.store.sqlite, "TRANSACTION_MAX_S", 0.5)
    app, other = oncely.App(sqlite_url), oncely.App(sqlite_url)
    other.job(name="remind")(lambda run: None)
    started = threading.Event()

    @app.job(delivery="transactional")
    def slow(run: oncely.Run) -> None:
        started.set()
        time.sleep(3)
        run.connection.execute("SELECT 1")

    app.defer(slow, at=app.now(), key="slow")
    ticking = threading.Thread(target=app.tick)
    ticking.start()
    try:
        assert started.wait(10)
        began = time.monotonic()
        other.defer("remind", at=other.now(), key="remind")  # another writer
        waited = time.monotonic() - began
    finally:
        ticking.join()
    assert waited < 2.0  # not the handler's 3 s, and not the 30 s busy timeout
    (row,) = app.history(key="slow")
    assert row.status == "retrying"
    assert "held SQLite's one write lock for more than 0.5 s" in (row.error or "")
    app.close()
    other.close()
