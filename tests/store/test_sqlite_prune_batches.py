"""SQLite: a prune deletes in batches, each its own short write transaction, so other writers
(claims, heartbeats, bookings) take the one write lock between batches instead of waiting out
the whole prune."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from oncely import at
from oncely.model import Planned
from oncely.store import SqliteStore, sqlite

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
BEFORE = NOW - timedelta(days=30)
MINUTE = timedelta(minutes=1)


def succeeded(store: SqliteStore, key: str, when: datetime) -> None:
    instance = at(when).next_instance_after(when - timedelta(microseconds=1))
    assert instance is not None
    store.save_schedule(
        tenant=None,
        key=key,
        job="sync",
        origin="api",
        trigger=at(when),
        payload=None,
        next_run_at=None,
        now=when,
        occurrences=[Planned(instance, origin="defer")],
    )
    claims = store.claim_due(
        owner="host#1", lease=MINUTE, limit=1, now=when, jobs=["sync"], reclaim=(), serial=()
    )
    assert store.book_success(claims, when + MINUTE) == claims


def test_another_writer_takes_the_write_lock_between_a_prunes_batches(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sqlite_url.removeprefix("sqlite:///")
    store = SqliteStore(path)
    store.migrate(NOW)
    for n in range(10):
        succeeded(store, f"k{n}", BEFORE - timedelta(days=1) + n * MINUTE)
    monkeypatch.setattr(sqlite, "PRUNE_BATCH", 3)
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    took_lock: list[bool] = []

    def before_each_statement(statement: str) -> None:
        # Traced as the statement starts: the prune's own BEGIN has not taken the lock yet.
        if statement != "BEGIN IMMEDIATE":
            return
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # "database is locked": no waiting, timeout=0
            took_lock.append(False)
            return
        other.execute("ROLLBACK")
        took_lock.append(True)

    with store._connect() as connection:
        connection.set_trace_callback(before_each_statement)
    assert store.prune(BEFORE, 100) == 10
    with store._connect() as connection:
        connection.set_trace_callback(None)
    assert took_lock == [True, True, True, True]  # batches of 3, 3, 3 and 1
    assert store.history(None) == []
    assert store.history_horizon() == BEFORE
    other.close()
    store.close()


def test_a_prune_stops_at_its_limit_across_batches(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteStore(sqlite_url.removeprefix("sqlite:///"))
    store.migrate(NOW)
    for n in range(8):
        succeeded(store, f"k{n}", BEFORE - timedelta(days=1) + n * MINUTE)
    monkeypatch.setattr(sqlite, "PRUNE_BATCH", 3)
    assert [store.prune(BEFORE, 5) for _ in range(3)] == [5, 3, 0]
    store.close()
