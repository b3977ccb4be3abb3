"""Lesson 4: five attempts, exponential backoff with jitter capped at an hour, then failed,
loudly; Terminal fails at once; one attempt books one failure."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from _engine_support import MakeApp

import oncely
from oncely.engine.retry import BACKOFF_CAP, backoff_ceiling
from oncely.testing import Clock


def failing_until_final(app: oncely.App, clock: Clock, key: str) -> list[oncely.Occurrence]:
    """Tick through every retry, reading the occurrence's history row after each attempt."""
    rows = []
    app.tick()
    while True:
        (row,) = app.history(key=key)
        rows.append(row)
        if row.status != "retrying":
            return rows
        assert row.retry_at is not None
        clock.set(row.retry_at)
        app.tick()


def test_five_attempts_with_capped_backoff_then_failed(
    make_app: MakeApp, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app()

    @app.job()
    def flaky(run: oncely.Run) -> None:
        raise ConnectionError(f"attempt {run.attempt}")

    app.defer(flaky, at=clock(), key="f")
    with caplog.at_level(logging.WARNING, logger="oncely"):
        rows = failing_until_final(app, clock, "f")

    assert [(r.status, r.attempts) for r in rows] == [
        ("retrying", 1), ("retrying", 2), ("retrying", 3), ("retrying", 4), ("failed", 5),
    ]  # fmt: skip
    for row in rows[:-1]:
        assert row.retry_at is not None
        assert row.finished_at is not None
        wait = row.retry_at - row.finished_at
        ceiling = backoff_ceiling(row.attempts)
        assert ceiling / 2 <= wait <= ceiling, (row.attempts, wait)
    assert "ConnectionError: attempt 5" in (rows[-1].error or "")
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "failed" in errors[0].getMessage()


def test_backoff_is_capped_at_an_hour(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()

    @app.job(retries=14)
    def stubborn(run: oncely.Run) -> None:
        raise ConnectionError("down")

    app.defer(stubborn, at=clock(), key="s")
    rows = failing_until_final(app, clock, "s")
    waits = [r.retry_at - r.finished_at for r in rows[:-1]]  # type: ignore[operator]
    assert len(rows) == 14
    assert rows[-1].status == "failed"
    assert max(waits) <= BACKOFF_CAP
    assert waits[-1] >= BACKOFF_CAP / 2  # 10 s * 2^12 is far above the cap
    assert waits[0] <= timedelta(seconds=10)


def test_terminal_fails_at_once_without_retry(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()
    calls = []

    @app.job()
    def charge(run: oncely.Run) -> None:
        calls.append(run.attempt)
        raise oncely.Terminal("card declined; retrying would charge twice")

    app.defer(charge, at=clock(), key="c")
    app.tick()
    clock.advance(hours=2)
    app.tick()
    (row,) = app.history(key="c")
    assert (row.status, row.attempts, calls) == ("failed", 1, [1])
    assert "card declined" in (row.error or "")


def test_one_attempt_books_one_failure(app: oncely.App, clock: Clock) -> None:
    @app.job()
    def flaky(run: oncely.Run) -> None:
        raise ValueError("x")

    app.defer(flaky, at=clock(), key="f")
    store = app.store
    claim = store.claim_due(
        owner="w#1",
        lease=timedelta(minutes=5),
        limit=1,
        now=clock(),
        jobs=["flaky"],
        reclaim=["flaky"],
        serial=[],
    )[0]
    first = store.book_failure(claim, clock(), error="x", retry_at=None, pause_after=None)
    second = store.book_failure(claim, clock(), error="x", retry_at=None, pause_after=None)
    assert (first.booked, second.booked) == (True, False)
    assert first.consecutive_failures == 1
    assert store.book_success([claim], clock()) == []
    (row,) = app.history(key="f")
    assert (row.status, row.attempts) == ("failed", 1)


def test_pause_after_pauses_the_schedule_loudly(
    make_app: MakeApp, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app()

    @app.job(oncely.every(minutes=1), retries=1, pause_after=3)
    def sync(run: oncely.Run) -> None:
        raise RuntimeError("upstream is gone")

    app.tick()
    with caplog.at_level(logging.ERROR, logger="oncely"):
        for _ in range(5):
            clock.advance(minutes=1)
            app.tick()
    (schedule,) = app.schedules()
    assert schedule.paused
    assert "paused after 3 consecutive failed occurrences" in (schedule.status_reason or "")
    assert sum(o.status == "failed" for o in app.history()) == 3
    assert any("paused after 3" in r.getMessage() for r in caplog.records)


def test_a_success_resets_the_failure_streak(
    make_app: MakeApp, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app()
    outcomes = iter([False, False, True, False, False, True, False, False, False])

    @app.job(oncely.every(minutes=1), retries=1, pause_after=3)
    def sync(run: oncely.Run) -> None:
        if not next(outcomes):
            raise RuntimeError("flaky")

    def streak() -> int:
        with app.store.transaction() as connection:
            row = connection.execute(
                "SELECT consecutive_failures FROM oncely_schedules WHERE key = 'sync'"
            ).fetchone()
        assert row is not None
        return int(row[0] if isinstance(row, tuple) else row["consecutive_failures"])

    app.tick()
    streaks = []
    for _ in range(8):
        clock.advance(minutes=1)
        app.tick()
        streaks.append(streak())
    assert streaks == [1, 2, 0, 1, 2, 0, 1, 2]
    assert not app.schedules()[0].paused
    with caplog.at_level(logging.ERROR, logger="oncely"):
        clock.advance(minutes=1)
        app.tick()  # the third failure in a row since the last success
    (schedule,) = app.schedules()
    assert schedule.paused
    assert schedule.status_reason == "paused after 3 consecutive failed occurrences"
    assert any("paused after 3 consecutive" in r.getMessage() for r in caplog.records)
