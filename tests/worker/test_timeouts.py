"""A handler that never returns is bounded by its job's ``timeout``: the attempt fails loudly and
its slot is freed; a worker whose every slot is held past a timeout is unhealthy (issue 22: two
hung handlers at concurrency 2 let a once-a-second job run once in 12 s, /healthz saying ok)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from _serving import eventually, serving

import oncely
from oncely.errors import ConfigurationError


def _now() -> datetime:
    return datetime.now(UTC)


def test_hung_handlers_fail_at_their_timeout_and_free_their_slots(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = oncely.App(url)
    released = threading.Event()
    ran: list[float] = []

    @app.job(timeout=timedelta(seconds=1), retries=1, overlap="allow")
    def hang(run: oncely.Run) -> None:
        released.wait(30)

    @app.job(overlap="allow")
    def quick(run: oncely.Run) -> None:
        ran.append(time.monotonic())

    app.defer(hang, at=_now(), key="hang:1")
    app.defer(hang, at=_now(), key="hang:2")
    try:
        with (
            caplog.at_level(logging.WARNING, logger="oncely"),
            serving(app, concurrency=2, wake_cap=1.0) as worker,
        ):
            eventually(lambda: worker.in_flight == 2, what="both hung handlers")
            began = time.monotonic()
            for n in range(4):
                app.defer(quick, at=_now() + timedelta(seconds=n * 0.5), key=f"quick:{n}")
            eventually(lambda: len(ran) == 4, timeout=10, what="the quick ones")
            # Not 12 s for one: the slots are free a second after the hung handlers started.
            assert ran[-1] - began < 4.0
            for key in ("hang:1", "hang:2"):
                (row,) = app.history(key=key)
                assert row.status == "failed"
                assert "timed out" in (row.error or "")
                assert [a.outcome for a in app.attempts(key, row.scheduled_for)] == ["timed_out"]
            assert caplog.text.count("ran past its timeout of 1s") == 2
            # Both slots are held by handlers running past their timeout: unhealthy.
            code, body = worker.health.status()
            assert code == 503
            assert "2 of 2 handler slots" in str(body["reason"])
            released.set()
            eventually(lambda: worker.health.status()[0] == 200, timeout=10, what="health back")
    finally:
        released.set()
    app.close()


def test_a_timeout_is_a_positive_duration_or_none(url: str) -> None:
    app = oncely.App(url)
    for bad in (timedelta(0), timedelta(seconds=-1), 5, "1h"):
        with pytest.raises(ConfigurationError, match="timeout="):
            app.job(name=f"j{abs(hash(str(bad)))}", timeout=bad)(lambda run: None)  # type: ignore[arg-type]
    assert app.job(name="forever", timeout=None)(lambda run: None).timeout is None
    assert app.job(name="default")(lambda run: None).timeout == timedelta(hours=1)
