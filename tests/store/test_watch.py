"""Wake-ups: PostgreSQL tells a watching worker when something may have come due sooner.

Notices on one channel arrive in commit order, so a test that expects none from some operations
follows them with one that notifies, waits for the count to reach it, and then checks, briefly,
that no extra notice follows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from oncely import at, every
from oncely.model import Claim, Planned
from oncely.store import PostgresStore, Store, Watch, open_store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)


class Notices:
    """Counts ``on_change`` calls; `wait_for` blocks until there have been so many."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = threading.Condition()

    def __call__(self) -> None:
        with self._changed:
            self.count += 1
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = 5.0) -> int:
        with self._changed:
            self._changed.wait_for(lambda: self.count >= count, timeout)
            return self.count

    def exactly(self, count: int) -> bool:
        """The count reaches ``count`` and no notice more follows (in commit order, promptly)."""
        return self.wait_for(count) == count and self.wait_for(count + 1, timeout=0.3) == count


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(postgres_url)
    yield store
    store.close()


@pytest.fixture
def notices(pg: PostgresStore) -> Iterator[Notices]:
    counted = Notices()
    watch = pg.watch(counted)
    assert watch is not None
    yield counted
    watch.close()


def defer(store: Store, key: str, when: datetime = NOW) -> None:
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
        now=NOW,
        occurrences=[Planned(instance, origin="defer")],
    )


def claim(store: Store, now: datetime = NOW) -> list[Claim]:
    return store.claim_due(
        owner="host#1", lease=LEASE, limit=10, now=now, jobs=["sync"], reclaim=(), serial=()
    )


def test_sqlite_has_no_watch(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    store.migrate(NOW)
    assert store.watch(lambda: None) is None
    store.close()


def test_saving_a_schedule_wakes_a_watcher(pg: PostgresStore, notices: Notices) -> None:
    pg.save_schedule(
        tenant=None,
        key="hourly",
        job="sync",
        origin="code",
        trigger=every(hours=1),
        payload=None,
        next_run_at=NOW,
        now=NOW,
    )
    assert notices.exactly(1)


def test_defer_trigger_backfill_and_resume_wake_a_watcher(
    pg: PostgresStore, notices: Notices
) -> None:
    defer(pg, "d")
    assert notices.wait_for(1) == 1
    soon = at(NOW + timedelta(seconds=1)).next_instance_after(NOW)
    assert soon is not None
    pg.add_occurrences(None, "d", [Planned(soon, origin="trigger")], now=NOW)
    assert notices.wait_for(2) == 2
    pg.add_occurrences(None, "d", [Planned(soon, origin="trigger")], now=NOW)  # nothing new
    pg.set_paused(None, "d", True, NOW)  # pausing makes nothing sooner
    pg.set_paused(None, "d", False, NOW)
    assert notices.exactly(3)


def test_claims_and_bookings_do_not_wake_a_watcher(pg: PostgresStore, notices: Notices) -> None:
    defer(pg, "a")
    defer(pg, "b")
    assert notices.wait_for(2) == 2
    first, second = claim(pg)
    pg.book_success([first], NOW)
    pg.book_failure(second, NOW, error="boom", retry_at=None, pause_after=None)
    defer(pg, "sentinel", NOW + timedelta(hours=1))
    assert notices.exactly(3)  # the sentinel's notice, and no other


def test_release_and_reclaim_wake_a_watcher(pg: PostgresStore, notices: Notices) -> None:
    defer(pg, "d")
    assert notices.wait_for(1) == 1
    assert pg.release(claim(pg), NOW) == 1
    assert notices.exactly(2)
    claim(pg)
    assert [r.status for r in pg.reclaim_expired(NOW + LEASE, {"sync": 5})] == ["retrying"]
    assert notices.exactly(3)


def test_a_watcher_outlives_an_on_change_that_raises(
    pg: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Notices()

    def on_change() -> None:
        calls()
        if calls.count == 1:
            raise RuntimeError("the worker's wake-up failed once")

    watch = pg.watch(on_change)
    assert watch is not None
    try:
        defer(pg, "a")
        defer(pg, "b")
        assert calls.wait_for(2) == 2
        assert watch.alive
        assert any("on_change raised" in r.getMessage() for r in caplog.records)
    finally:
        watch.close()


def test_close_is_prompt_and_final(pg: PostgresStore) -> None:
    closed, still = Notices(), Notices()
    watch: Watch | None = pg.watch(closed)
    other = pg.watch(still)
    assert watch is not None
    assert other is not None
    try:
        started = time.monotonic()
        watch.close()
        assert time.monotonic() - started < 1.0
        assert not watch.alive
        watch.close()  # again: nothing happens
        defer(pg, "after-close")
        assert still.wait_for(1) == 1  # delivered to the watch still open...
        assert closed.count == 0  # ...and never to the closed one
    finally:
        other.close()
