"""The wake-up channel (PostgreSQL LISTEN) is an optimisation: when the server refuses it a
connection, bookings and heartbeats go on, the worker looks for work every ``wake_cap``, says so
once, and listens again once it can (issue 22, case 1)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from _serving import eventually, serving

import oncely
from _proxy import proxied
from oncely.store.postgres import PostgresStore


def _now() -> datetime:
    return datetime.now(UTC)


def _listening(url: str) -> list[int]:
    """The backends of ``url``'s database that LISTEN for oncely's changes."""
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()"
        ).fetchall()
    return [row[0] for row in rows]


def _hang_up_listeners(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        for pid in _listening(url):
            connection.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_refused_wake_up_channel_delays_neither_bookings_nor_heartbeats(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with proxied(postgres_url) as (proxy, through):
        app = oncely.App(through)
        ran: list[str] = []
        release = threading.Event()

        @app.job(lease=timedelta(seconds=2))
        def long(run: oncely.Run) -> None:
            ran.append(f"long attempt {run.attempt}")
            release.wait(20)

        @app.job()
        def quick(run: oncely.Run) -> None:
            ran.append("quick")

        # Another worker beside it, on the server itself: it takes over any lease let lapse.
        other = oncely.App(postgres_url)
        other.job(name="long", lease=timedelta(seconds=2))(
            lambda run: ran.append(f"long attempt {run.attempt} on the other worker")
        )
        other.job(name="quick")(lambda run: ran.append("quick on the other worker"))
        app.defer(long, at=_now(), key="long")
        with (
            caplog.at_level(logging.INFO, logger="oncely"),
            serving(app, concurrency=1, wake_cap=1.0) as worker,
        ):
            eventually(lambda: worker.in_flight == 1 and _listening(postgres_url), what="start")
            time.sleep(1.0)  # a heartbeat has used the pool: its connections are open
            proxy.refuse_new()  # the server is at its connection limit for this worker
            _hang_up_listeners(postgres_url)
            with serving(other, concurrency=1, wake_cap=1.0):
                # Three leases' worth: without heartbeats the other worker takes it over.
                time.sleep(6.0)
                app_direct = oncely.App(postgres_url)
                app_direct.job(name="quick")(lambda run: None)
                app_direct.defer("quick", at=_now(), key="quick")
                release.set()
                eventually(
                    lambda: app_direct.history(key="long")[0].status == "succeeded",
                    timeout=15,
                    what="the long handler's success, booked by its own worker",
                )
                eventually(
                    lambda: app_direct.history(key="quick")[0].status == "succeeded",
                    timeout=15,
                    what="the quick one-off",
                )
            assert ran.count("long attempt 1") == 1
            assert not [r for r in ran if "long" in r and r != "long attempt 1"], ran
            [occurrence] = app_direct.history(key="long")
            assert occurrence.attempts == 1
            refused = [r for r in caplog.records if "wake-up channel" in r.getMessage()]
            assert len(refused) == 1, [r.getMessage() for r in refused]
            assert refused[0].levelno == logging.WARNING
            assert "every 1 s" in refused[0].getMessage()
            proxy.restore()
            eventually(
                lambda: "wake-up channel is back" in caplog.text,
                timeout=15,
                what="the channel to recover",
            )
            eventually(lambda: _listening(postgres_url), what="a LISTEN connection again")
        app_direct.close()
        other.close()
        app.close()


def test_a_change_committed_before_the_channel_listens_is_not_missed(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The channel opens late (a slow server, a refused connection retried): a timer deferred
    # after the loop's first look and before LISTEN sent a notice nobody heard. Opening the
    # channel makes the loop look again; without that it slept its whole wake_cap.
    opened = threading.Event()
    watch = PostgresStore.watch

    def late_watch(self: PostgresStore, *args: object, **kwargs: object) -> object:
        opened.wait(20)
        return watch(self, *args, **kwargs)

    monkeypatch.setattr(PostgresStore, "watch", late_watch)
    app = oncely.App(postgres_url)
    ran: list[datetime] = []
    app.job(name="ping")(lambda run: ran.append(_now()))
    other = oncely.App(postgres_url)
    other.job(name="ping")(lambda run: None)
    with serving(app, wake_cap=30.0) as worker:
        eventually(lambda: worker.health.status()[0] == 200, what="the loop's first turn")
        time.sleep(0.5)  # the loop sleeps now, until its 30 s cap
        deferred = _now()
        other.defer("ping", at=deferred, key="ping")
        time.sleep(0.5)
        assert not ran
        opened.set()
        eventually(lambda: ran, timeout=10, what="the ping deferred before the channel listened")
    print(f"ran {(ran[0] - deferred).total_seconds():.2f} s after it was deferred")
    assert (ran[0] - deferred).total_seconds() < 5.0
    other.close()
    app.close()
