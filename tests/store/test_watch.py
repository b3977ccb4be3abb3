"""Wake-ups: PostgreSQL tells a watching worker when something may have come due sooner.

Notices on one channel arrive in commit order, so after each call a test posts a mark of its
own, and the notices before a mark are the ones that call sent (`Story`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from _processes import wait_until
from oncely import App, Run, at, every
from oncely.model import Claim, Planned
from oncely.store import PostgresStore, Store, Watch, open_store
from oncely.testing import Clock

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


class Story:
    """Which call sent which notice: after each call the test posts a mark on the channel.

    A listener of its own reads the channel's notices in commit order, so the store's notices
    (empty payload) that arrive before a mark were sent by the call that the mark names. The
    watch under test counts the marks too.
    """

    def __init__(self, url: str, channel: str = "oncely") -> None:
        self._channel = channel
        self._listening = psycopg.connect(url, autocommit=True)
        self._listening.execute(f"LISTEN {channel}")
        self._marking = psycopg.connect(url, autocommit=True)
        self.marks = 0

    def mark(self, call: str) -> None:
        self._marking.execute("SELECT pg_notify(%s, %s)", [self._channel, call])
        self.marks += 1

    def told(self) -> list[tuple[str, int]]:
        """Each mark with the number of store notices sent by its call, up to the last mark."""
        told: list[tuple[str, int]] = []
        sent = 0
        for notice in self._listening.notifies(timeout=10.0):
            if notice.payload == "":
                sent += 1
                continue
            told.append((notice.payload, sent))
            sent = 0
            if len(told) == self.marks:
                break
        return told

    def close(self) -> None:
        self._listening.close()
        self._marking.close()


@pytest.fixture
def story(postgres_url: str) -> Iterator[Story]:
    told = Story(postgres_url)
    yield told
    told.close()


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


def test_saving_a_schedule_wakes_a_watcher(pg: PostgresStore, story: Story) -> None:
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
    story.mark("save")
    assert story.told() == [("save", 1)]


def test_defer_trigger_backfill_and_resume_wake_a_watcher(
    postgres_url: str, pg: PostgresStore, notices: Notices, story: Story
) -> None:
    clock = Clock(NOW)
    app = App(postgres_url, clock=clock)

    @app.job(every(hours=1))
    def hourly(run: Run) -> None:
        pass

    try:
        app.tick()  # saves the code-declared schedule: next run 13:00
        story.mark("first tick")
        app.defer(hourly, at=NOW + timedelta(minutes=5), key="d")
        story.mark("defer")
        app.trigger("d")
        story.mark("trigger")
        app.trigger("d")  # the same instant: nothing new
        story.mark("trigger again")
        app.pause("d")  # pausing makes nothing sooner
        story.mark("pause")
        app.resume("d")
        story.mark("resume")
        clock.advance(hours=2, minutes=30)
        app.tick()  # 13:00 and 14:00 are recorded skipped: 14:00 is beyond grace
        story.mark("tick past grace")
        skipped = (NOW + timedelta(hours=1), NOW + timedelta(hours=2))
        assert {o.status for o in app.history(key="hourly")} == {"skipped"}
        assert app.backfill("hourly", *skipped) == 2  # re-armed, no row added
        story.mark("backfill of skipped")
        assert app.backfill("hourly", *skipped) == 0
        story.mark("backfill again")
        assert app.backfill("hourly", NOW - timedelta(hours=3), NOW - timedelta(hours=2)) == 2
        story.mark("backfill of new")
        assert story.told() == [
            ("first tick", 1),
            ("defer", 1),
            ("trigger", 1),
            ("trigger again", 0),
            ("pause", 0),
            ("resume", 1),
            ("tick past grace", 0),
            ("backfill of skipped", 1),
            ("backfill again", 0),
            ("backfill of new", 1),
        ]
        assert notices.wait_for(6 + story.marks) == 6 + story.marks  # the watch heard them all
    finally:
        app.close()


def test_claims_and_bookings_do_not_wake_a_watcher(pg: PostgresStore, story: Story) -> None:
    defer(pg, "a")
    defer(pg, "b")
    story.mark("defers")
    first, second = claim(pg)
    story.mark("claim")
    pg.book_success([first], NOW)
    story.mark("success")
    pg.book_failure(second, NOW, error="boom", retry_at=None, pause_after=None)
    story.mark("failure")
    assert story.told() == [("defers", 2), ("claim", 0), ("success", 0), ("failure", 0)]


def test_each_booking_call_tells_the_outcome_channel_once(
    postgres_url: str, pg: PostgresStore
) -> None:
    story = Story(postgres_url, channel="oncely_outcomes")
    try:
        for key in "abcde":
            defer(pg, key)
        story.mark("defers")
        a, b, c, d, e = claim(pg)
        story.mark("claim")
        pg.book_success([a, b], NOW)
        story.mark("two successes")
        pg.book_skipped(c, NOW, "misfire: too late")
        story.mark("skipped")
        pg.book_failure(d, NOW, error="boom", retry_at=None, pause_after=None)
        story.mark("failure")
        pg.book_success([a], NOW)  # booked already: nothing booked, nothing told
        story.mark("again")
        assert story.told() == [
            ("defers", 0), ("claim", 0), ("two successes", 1), ("skipped", 1), ("failure", 1),
            ("again", 0),
        ]  # fmt: skip
        assert e.key == "e"
    finally:
        story.close()


def test_transactional_successes_of_one_tick_tell_the_outcome_channel_once(
    postgres_url: str,
) -> None:
    # A notice in each handler's commit serialised those commits on the notify queue and woke
    # every listening backend once per job; one notice per batch, after the commits, tells an
    # open dashboard as much.
    clock = Clock(NOW)
    app = App(postgres_url, clock=clock)
    committed: list[str] = []

    @app.job(delivery="transactional", overlap="allow")
    def bill(run: Run) -> None:
        assert run.connection is not None
        run.connection.execute("SELECT 1")
        committed.append(run.key)

    story = Story(postgres_url, channel="oncely_outcomes")
    try:
        app.defer_many(bill, [{"at": NOW, "key": f"bill:{n}"} for n in range(5)])
        story.mark("defers")
        app.tick()
        story.mark("tick")
        app.tick()  # nothing due: nothing told
        story.mark("idle tick")
        assert len(committed) == 5
        assert {o.status for o in app.history()} == {"succeeded"}
        assert story.told() == [("defers", 0), ("tick", 1), ("idle tick", 0)]
    finally:
        story.close()
        app.close()


def test_a_worker_tells_a_dashboard_of_its_transactional_successes(postgres_url: str) -> None:
    app = App(postgres_url)

    @app.job(delivery="transactional", overlap="allow")
    def bill(run: Run) -> None:
        assert run.connection is not None
        run.connection.execute("SELECT 1")

    app.migrate()
    app.defer_many(bill, [{"at": datetime.now(UTC), "key": f"bill:{n}"} for n in range(20)])
    with psycopg.connect(postgres_url, autocommit=True) as dashboard:
        dashboard.execute("LISTEN oncely_outcomes")
        app.start()
        try:
            told = next(dashboard.notifies(timeout=10.0), None)
            assert told is not None, "no outcome notice in 10 s"

            def all_succeeded() -> bool:
                return all(o.status == "succeeded" for o in app.history())

            wait_until(all_succeeded, 10, "every transactional job to succeed")
        finally:
            app.stop()
            app.close()


def test_only_a_watch_of_outcomes_hears_bookings(pg: PostgresStore) -> None:
    defer(pg, "a")
    (booked,) = claim(pg)
    workers, dashboard = Notices(), Notices()
    watches = [pg.watch(workers), pg.watch(dashboard, outcomes=True)]
    try:
        pg.book_success([booked], NOW)
        assert dashboard.wait_for(1) == 1
        time.sleep(0.3)
        assert workers.count == 0
    finally:
        for watch in watches:
            assert watch is not None
            watch.close()


def test_release_and_reclaim_wake_a_watcher(pg: PostgresStore, story: Story) -> None:
    defer(pg, "d")
    story.mark("defer")
    assert pg.release(claim(pg), NOW) == 1
    story.mark("claim and release")
    claim(pg)
    story.mark("claim")
    assert [r.status for r in pg.reclaim_expired(NOW + LEASE, {"sync": 5})] == ["retrying"]
    story.mark("reclaim")
    assert story.told() == [("defer", 1), ("claim and release", 1), ("claim", 0), ("reclaim", 1)]


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
