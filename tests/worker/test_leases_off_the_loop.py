"""Leases do not wait on the loop: a cycle that hangs (a materialise stuck on a lock, a
housekeeping sweep) longer than a lease costs no lease, and says so (issue 22)."""

from __future__ import annotations

import logging
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from _serving import eventually, serving

import oncely


def test_a_loop_blocked_longer_than_a_lease_loses_no_lease_and_says_so(
    url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = oncely.App(url)
    ran: list[str] = []
    lost: list[bool] = []

    @app.job(lease=timedelta(seconds=1))
    def long(run: oncely.Run) -> None:
        ran.append(f"attempt {run.attempt}")
        time.sleep(6.0)
        lost.append(run.lease_lost)

    # Another worker beside it: it takes over any lease let lapse, and runs it a second time.
    other = oncely.App(url)
    other.job(name="long", lease=timedelta(seconds=1))(
        lambda run: ran.append(f"attempt {run.attempt} on the other worker")
    )
    app.defer(long, at=datetime.now(UTC), key="long")
    with (
        caplog.at_level(logging.INFO, logger="oncely"),
        serving(app, concurrency=1, wake_cap=0.5) as worker,
    ):
        eventually(lambda: worker.in_flight == 1, what="the handler to start")
        engine = worker.engine
        prepare, hung = engine.prepare, threading.Event()

        def hanging_prepare(report: oncely.TickReport, **options: Any) -> None:
            if not hung.is_set():
                hung.set()
                time.sleep(4.0)  # four leases: a materialise stuck behind a lock
            prepare(report, **options)

        monkeypatch.setattr(engine, "prepare", hanging_prepare)
        with serving(other, concurrency=1, wake_cap=0.5):
            eventually(lambda: hung.is_set(), what="the loop to hang")
            eventually(
                lambda: app.history(key="long")[0].status == "succeeded",
                timeout=20,
                what="the long handler",
            )
    assert ran == ["attempt 1"]
    assert lost == [False]
    [occurrence] = app.history(key="long")
    assert occurrence.attempts == 1
    blocked = [m for m in (r.getMessage() for r in caplog.records) if "loop has been busy" in m]
    assert len(blocked) == 1, blocked
    busy = re.match(
        r"oncely: the worker's loop has been busy materialising for (\d+) s;", blocked[0]
    )
    assert busy is not None, blocked
    assert int(busy.group(1)) >= 3
    back = re.search(r"the worker's loop is back after ([\d.]+) s materialising", caplog.text)
    assert back is not None
    assert float(back.group(1)) >= 4.0
    other.close()
    app.close()
