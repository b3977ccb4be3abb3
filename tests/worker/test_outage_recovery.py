"""A worker's outage ends when the store answers again, not at the first turn that asked it
nothing (PostgreSQL, through a proxy the test cuts: tests/_proxy.py)."""

from __future__ import annotations

import logging
import time

import pytest
from _serving import eventually, serving

import oncely
from _proxy import proxied


def _said(caplog: pytest.LogCaptureFixture, level: int, words: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "oncely" and r.levelno == level and words in r.getMessage()
    ]


def test_a_turn_with_nothing_due_does_not_end_an_outage(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Nothing comes due for an hour. The cut kills the change watch, whose "look for due work
    # now" made a prepare that failed; the turns after it had nothing due and asked the store
    # nothing, so the first of them logged "tick recovered" and /healthz answered 200 while the
    # server was still out of reach. The real first call after it then logged a second outage.
    caplog.set_level(logging.INFO, logger="oncely")
    with proxied(postgres_url) as (proxy, through):
        app = oncely.App(through)

        @app.job()
        def hourly(run: oncely.Run) -> None:
            pass

        app.schedule(hourly, oncely.every(hours=1), key="hourly")
        with serving(app) as worker:
            eventually(lambda: worker.health.status()[0] == 200, what="a healthy worker")
            proxy.cut()
            eventually(lambda: _said(caplog, logging.ERROR, "tick failed"), what="the failure")
            time.sleep(3)  # several turns of the loop, at 0.5, 1 and 2 s
            recovered_early = _said(caplog, logging.WARNING, "recovered after")
            code_in_outage = worker.health.status()[0]
            proxy.restore()
            eventually(lambda: _said(caplog, logging.WARNING, "recovered after"), timeout=40)
        assert recovered_early == []
        assert code_in_outage == 503
        assert len(_said(caplog, logging.ERROR, "tick failed")) == 1
