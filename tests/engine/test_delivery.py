"""Lesson 3, transactional delivery: the handler's writes and the occurrence's completion commit
together, and roll back together."""

from __future__ import annotations

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
