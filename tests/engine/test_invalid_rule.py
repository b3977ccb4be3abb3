"""Lesson 6: one bad stored rule stops its own schedule, never the loop that serves the rest."""

from __future__ import annotations

import logging

import pytest
from _engine_support import damage

import oncely
from oncely.testing import Clock


@pytest.mark.parametrize(
    "spec",
    [
        '{"kind": "rrule", "v": 1, "text": "FREQ=SOMETIMES", "tz": "UTC"}',
        '{"kind": "cron", "v": 1, "expr": "61 * * * *", "tz": "UTC"}',
        '{"kind": "every", "v": 1, "seconds": -5}',
        '{"kind": "teleport"}',
    ],
)
def test_lesson_06_a_bad_stored_rule_marks_only_its_schedule_invalid(
    app: oncely.App, clock: Clock, spec: str, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(run.key)

    for key in ("bad", "good"):
        app.schedule(remind, oncely.every(minutes=1), key=key)
    damage(app, "bad", spec)
    clock.advance(minutes=1)
    with caplog.at_level(logging.ERROR, logger="oncely"):
        app.tick()
        clock.advance(minutes=1)
        app.tick()

    assert ran == ["good", "good"]
    statuses = {s.key: s.status for s in app.schedules()}
    assert statuses == {"bad": "invalid", "good": "active"}
    (invalid,) = app.history(key="bad")
    assert invalid.status == "invalid"
    assert "invalid" in (invalid.reason or "")
    assert sum("stopped" in r.getMessage() for r in caplog.records) == 1
