"""A prepare out of time (the worker gives each one a budget): what it leaves is written by the
next, after what came due meanwhile, and nothing is written twice or lost. Both stores.

Batches of three here, so that a few schedules make a backlog of several batches.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from _engine_support import MakeApp

import oncely
from oncely.engine import TickReport, tick
from oncely.testing import Clock

MONDAY = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _batches_of_three(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tick, "_SCHEDULE_BATCH", 3)


def _pending(app: oncely.App) -> set[tuple[str, datetime]]:
    return {(o.key, o.scheduled_for) for o in app.history(limit=1000) if o.status == "pending"}


def _late_app(
    make_app: MakeApp, clock: Clock, late: int, ran: list[tuple[str, datetime]] | None = None
) -> oncely.App:
    """An app with ``late`` hourly schedules a minute apart from 09:30 (``late:0`` first) and
    an every-minute one due before them, the clock at 09:40: every one of them is due. Runs are
    added to ``ran``."""
    app = make_app()
    runs = [] if ran is None else ran

    @app.job(name="job")
    def job(run: oncely.Run) -> None:
        runs.append((run.key, run.scheduled_for))

    clock.set(MONDAY)
    app.schedule(job, oncely.every(minutes=1), key="fast")
    for n in range(late):
        app.schedule(job, oncely.cron(f"{30 + n} * * * *"), key=f"late:{n}")
    clock.set(MONDAY + timedelta(minutes=40))
    return app


def _half_hour(n: int) -> datetime:
    return MONDAY + timedelta(minutes=30 + n)


def test_a_prepare_out_of_time_leaves_the_rest_to_the_next_which_writes_the_newly_due_first(
    make_app: MakeApp, clock: Clock
) -> None:
    app = _late_app(make_app, clock, late=7)
    engine = app._the_engine()
    at_40 = MONDAY + timedelta(minutes=40)

    first = TickReport()
    engine.prepare(first, budget=0)
    assert first.behind
    assert _pending(app) == {("fast", at_40), ("late:0", _half_hour(0)), ("late:1", _half_hour(1))}

    clock.advance(minutes=1)  # "fast" is due again (09:40 is superseded); five late ones wait
    second = TickReport()
    engine.prepare(second, budget=0)
    assert second.behind
    at_41 = ("fast", at_40 + timedelta(minutes=1))
    assert _pending(app) == {at_41, *{(f"late:{n}", _half_hour(n)) for n in range(5)}}

    third = TickReport()
    engine.prepare(third, budget=0)
    assert not third.behind
    assert _pending(app) == {at_41, *{(f"late:{n}", _half_hour(n)) for n in range(7)}}


def test_a_tick_after_a_prepare_out_of_time_runs_everything_due_once(
    make_app: MakeApp, clock: Clock
) -> None:
    ran: list[tuple[str, datetime]] = []
    app = _late_app(make_app, clock, late=8, ran=ran)
    engine = app._the_engine()
    engine.prepare(TickReport(), budget=0)
    clock.advance(minutes=1)

    report = app.tick()

    assert not report.behind
    assert sorted(ran) == sorted(set(ran))
    assert {key for key, _ in ran} == {"fast", *{f"late:{n}" for n in range(8)}}
    assert ("fast", MONDAY + timedelta(minutes=41)) in ran
    assert _pending(app) == set()


def test_one_prepare_in_time_leaves_no_backlog(make_app: MakeApp, clock: Clock) -> None:
    app = _late_app(make_app, clock, late=7)
    report = TickReport()
    app._the_engine().prepare(report, budget=60)
    assert not report.behind
    assert len(_pending(app)) == 8
