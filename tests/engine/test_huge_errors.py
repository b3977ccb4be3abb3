"""A handler's huge exception message is cut in the log as it is in history: a 50 MB message
over two attempts wrote 100 MB of log (issue 22)."""

from __future__ import annotations

import logging

import pytest

import oncely
from oncely.testing import Clock

HUGE = 50 * 1024 * 1024


def test_a_50_mb_exception_message_is_cut_in_the_log_and_in_history(
    app: oncely.App, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    @app.job(retries=2)
    def explode(run: oncely.Run) -> None:
        try:
            raise KeyError("the cause, " + "c" * HUGE)
        except KeyError as cause:
            raise RuntimeError("x" * HUGE) from cause

    app.defer(explode, at=clock(), key="boom")
    with caplog.at_level(logging.INFO, logger="oncely"):
        app.tick()
        (row,) = app.history(key="boom")
        clock.set(row.retry_at)  # type: ignore[arg-type]
        app.tick()
    (row,) = app.history(key="boom")
    assert row.status == "failed"
    assert len(row.error or "") <= 8000
    # The attempt retried is kept cut the same way.
    assert [len(a.error or "") <= 8000 for a in app.attempts("boom", row.scheduled_for)] == [
        True,
        True,
    ]
    logged = caplog.text
    assert len(logged) < 100_000, f"{len(logged):,} characters of log"
    assert "RuntimeError: xxxx" in logged
    assert "characters cut" in logged
    assert "The above exception was the direct cause" in logged  # the chain is kept
    assert "KeyError: " in logged
    assert "the cause, ccc" in logged
