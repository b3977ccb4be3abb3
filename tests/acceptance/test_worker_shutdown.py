"""SIGTERM drains: running handlers finish within the drain timeout, the process exits 0."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

import oncely
from _processes import terminate, wait_until, workers

HERE = Path(__file__).resolve().parent
APP = "_worker_app:app"


def _status(url: str, key: str) -> tuple[str, str | None] | None:
    """The status and reason of ``key``'s one occurrence."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT o.status, o.reason FROM oncely_occurrences o JOIN oncely_schedules s "
            "ON s.id = o.schedule_id WHERE s.key = %s",
            (key,),
        ).fetchone()
    return None if row is None else (str(row[0]), row[1])


def _defer_slow(url: str, key: str) -> None:
    app = oncely.App(url)

    @app.job()
    def slow(run: oncely.Run) -> None: ...

    app.defer(slow, at=datetime.now(UTC), key=key)
    app.close()


@pytest.mark.parametrize(
    ("sleep_s", "drain_s", "ends"), [(2.0, 10.0, "succeeded"), (60.0, 1.0, "running")]
)
def test_sigterm_waits_for_running_handlers_up_to_the_drain_timeout(
    postgres_url: str, tmp_path: Path, sleep_s: float, drain_s: float, ends: str
) -> None:
    started = tmp_path / "started"
    env = {
        "ONCELY_DATABASE_URL": postgres_url,
        "ONCELY_TEST_SLEEP": str(sleep_s),
        "ONCELY_TEST_STARTED": str(started),
    }
    with workers(APP, HERE, env, tmp_path, "--drain-timeout", str(drain_s)) as group:
        process = group.start()
        _defer_slow(postgres_url, "slow-1")
        wait_until(started.exists, 20, "the handler to start")
        code, took = terminate(process, within=drain_s + 10)
        print(f"sleep {sleep_s} s, drain timeout {drain_s} s: exit {code} after {took:.2f} s")
        assert code == 0, group.output()
        assert took < min(sleep_s, drain_s) + 2.0
        status = _status(postgres_url, "slow-1")
        assert status is not None
        assert status[0] == ends
        if ends == "running":
            assert "left to expire" in group.output()
            # History says so too, not only the log of a process that is gone.
            assert status[1] is not None
            assert "drain timeout" in status[1]
            assert "left to expire" in status[1]


def test_a_second_signal_exits_at_once(postgres_url: str, tmp_path: Path) -> None:
    started = tmp_path / "started"
    env = {
        "ONCELY_DATABASE_URL": postgres_url,
        "ONCELY_TEST_SLEEP": "60",
        "ONCELY_TEST_STARTED": str(started),
    }
    with workers(APP, HERE, env, tmp_path, "--drain-timeout", "30") as group:
        process = group.start()
        _defer_slow(postgres_url, "slow-2")
        wait_until(started.exists, 20, "the handler to start")
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=5)
        assert time.monotonic() - started < 2.0
        assert code == 128 + signal.SIGTERM, group.output()
