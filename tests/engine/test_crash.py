"""Lessons 2 and 3: a crashed worker's claim expires on its own; what happens next is the job's
delivery mode -- at_least_once runs it again with the same idempotency key, at_most_once leaves it
abandoned, loudly, and never runs it again."""

from __future__ import annotations

import logging
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _engine_support import MakeApp

import oncely
from oncely.testing import Clock

HERE = Path(__file__).parent


def crash_mid_handler(url: str, delivery: str, tmp_path: Path) -> str:
    marker = tmp_path / "started.txt"
    done = subprocess.run(
        [sys.executable, str(HERE / "_crash_worker.py"), url, delivery, str(marker)],
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, "the worker should have died inside the handler"
    return marker.read_text()


def test_at_least_once_crash_reruns_after_lease_expiry_with_the_same_key(
    make_app: MakeApp, clock: Clock, url: str, tmp_path: Path
) -> None:
    clock.set(datetime.now(UTC))
    app = make_app()
    reruns: list[tuple[str, int, int]] = []

    @app.job()
    def fragile(run: oncely.Run) -> None:
        reruns.append((run.idempotency_key, run.attempt, run.fence))

    app.defer(fragile, at=clock() - timedelta(seconds=1), key="f")
    key, _attempt, fence = crash_mid_handler(url, "at_least_once", tmp_path).split()
    (row,) = app.history(key="f")
    assert row.status == "running"

    clock.advance(minutes=4)  # the lease (5 minutes) still holds: nobody takes over
    app.tick()
    assert reruns == []
    clock.advance(minutes=2)
    app.tick()
    assert reruns == [(key, 2, int(fence) + 1)]
    (row,) = app.history(key="f")
    assert (row.status, row.attempts) == ("succeeded", 2)


def test_at_most_once_crash_ends_abandoned_and_never_reruns(
    make_app: MakeApp,
    clock: Clock,
    url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock.set(datetime.now(UTC))
    app = make_app()
    reruns: list[int] = []

    @app.job(delivery="at_most_once")
    def fragile(run: oncely.Run) -> None:
        reruns.append(run.attempt)

    app.defer(fragile, at=clock() - timedelta(seconds=1), key="f")
    crash_mid_handler(url, "at_most_once", tmp_path)
    clock.advance(minutes=6)
    with caplog.at_level(logging.ERROR, logger="oncely"):
        app.tick()
    clock.advance(hours=3)
    app.tick()
    assert reruns == []
    (row,) = app.history(key="f")
    assert (row.status, row.attempts) == ("abandoned", 1)
    assert "never runs it again" in (row.reason or "")
    assert any("abandoned" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")


def test_at_most_once_is_durably_started_before_the_call(app: oncely.App, clock: Clock) -> None:
    seen: list[str] = []

    @app.job(delivery="at_most_once")
    def once(run: oncely.Run) -> None:
        (row,) = app.history(key="o")  # read through another connection
        seen.append(row.status)

    app.defer(once, at=clock(), key="o")
    app.tick()
    assert seen == ["running"]
