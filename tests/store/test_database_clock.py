"""The default clock is the database's: a machine whose own clock is off still agrees with the
others on when an occurrence is due and when a lease expires (the fault suite's clock skew
scenario shows it with two workers)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

import oncely
import oncely.clock
from oncely.clock import DatabaseClock

SKEW = timedelta(seconds=30)


@pytest.fixture
def skewed(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's clock, 30 s ahead."""
    monkeypatch.setattr(oncely.clock, "wall", lambda: datetime.now(UTC) + SKEW)


def test_on_postgres_a_machine_clock_30_s_ahead_is_corrected(
    postgres_url: str, skewed: None, caplog: pytest.LogCaptureFixture
) -> None:
    app = oncely.App(postgres_url)
    with caplog.at_level(logging.WARNING, logger="oncely.clock"):
        app.schedules()  # first use: the store opens and the clock measures its offset
    try:
        assert abs(app.now() - datetime.now(UTC)) < timedelta(seconds=1)
        (logged,) = [r.getMessage() for r in caplog.records]
        assert logged.startswith("this machine's clock is ")
        assert " s ahead of the database's; oncely keeps the database's time" in logged
    finally:
        app.close()


def test_on_sqlite_there_is_no_server_so_the_machine_clock_decides(
    sqlite_url: str, skewed: None
) -> None:
    app = oncely.App(sqlite_url)
    app.schedules()
    try:
        assert abs(app.now() - (datetime.now(UTC) + SKEW)) < timedelta(seconds=1)
    finally:
        app.close()


def test_the_offset_is_measured_again_once_a_minute_at_most(postgres_url: str) -> None:
    app = oncely.App(postgres_url)
    try:
        store = app.store
        clock = DatabaseClock()
        asked = 0
        real = store.database_now

        def counted() -> datetime | None:
            nonlocal asked
            asked += 1
            return real()

        store.database_now = counted  # type: ignore[method-assign]
        for _ in range(5):
            clock.sync(store)
        clock.sync(store, every_s=0)
        assert asked == 2
    finally:
        app.close()


def test_an_injected_clock_replaces_the_database_clock(postgres_url: str) -> None:
    frozen = datetime(2030, 1, 1, tzinfo=UTC)
    app = oncely.App(postgres_url, clock=lambda: frozen)
    try:
        app.schedules()
        assert app.now() == frozen
    finally:
        app.close()


def _step(monkeypatch: pytest.MonkeyPatch, by: timedelta) -> None:
    """This machine's clock stepped by ``by`` (an NTP correction, ``date -s``) from now on."""
    monkeypatch.setattr(oncely.clock, "wall", lambda: datetime.now(UTC) + by)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_step_of_the_machine_clock_changes_nothing_between_samples(
    store: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = oncely.App(request.getfixturevalue(f"{store}_url"))
    try:
        app.schedules()  # the first sample
        _step(monkeypatch, timedelta(hours=1))
        assert abs(app.now() - datetime.now(UTC)) < timedelta(seconds=1)
        _step(monkeypatch, -timedelta(hours=1))
        assert abs(app.now() - datetime.now(UTC)) < timedelta(seconds=1)
    finally:
        app.close()


def test_on_postgres_a_sample_after_a_step_keeps_the_database_time(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    app = oncely.App(postgres_url)
    try:
        clock = DatabaseClock()
        clock.sync(app.store)
        _step(monkeypatch, timedelta(hours=1))
        with caplog.at_level(logging.WARNING, logger="oncely.clock"):
            clock.sync(app.store, every_s=0)
        assert abs(clock() - datetime.now(UTC)) < timedelta(seconds=1)
        (logged,) = [r.getMessage() for r in caplog.records]
        assert logged.startswith("this machine's clock is 3600.0 s ahead of the database's")
    finally:
        app.close()


def test_a_sample_that_disagrees_widely_with_the_time_kept_is_logged(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    app = oncely.App(sqlite_url)
    try:
        clock = DatabaseClock()
        clock.sync(app.store)
        _step(monkeypatch, timedelta(minutes=5))
        with caplog.at_level(logging.WARNING, logger="oncely.clock"):
            clock.sync(app.store, every_s=0)
        (logged,) = [r.getMessage() for r in caplog.records]
        assert logged.startswith("the time kept since the last sample is 300.0 s behind the new")
        # SQLite has no other time: the machine's, stepped, is taken.
        assert abs(clock() - (datetime.now(UTC) + timedelta(minutes=5))) < timedelta(seconds=1)
    finally:
        app.close()
