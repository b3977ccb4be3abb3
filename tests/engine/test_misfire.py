"""Lesson 8: after downtime never replay weeks of the past; what did not run is recorded."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from _engine_support import MakeApp

import oncely
from oncely.testing import Clock


def downtime(make_app: MakeApp, clock: Clock, misfire: str, **options: object) -> oncely.App:
    app = make_app()

    @app.job(oncely.every(hours=1), misfire=misfire, **options)  # type: ignore[call-overload]
    def hourly(run: oncely.Run) -> None:
        pass

    clock.set(clock().replace(minute=30, second=0))
    app.tick()  # reconciles: next run on the hour
    clock.advance(weeks=3, minutes=10)  # three weeks down; back at hh:40
    app.tick()
    return app


def test_three_weeks_down_under_skip_fires_nothing_outside_grace(
    make_app: MakeApp, clock: Clock
) -> None:
    app = downtime(make_app, clock, "skip")
    history = app.history(limit=1000)
    assert [o for o in history if o.status == "succeeded"] == []  # hh:00 is 40 min old > 15 min
    skipped = [o for o in history if o.status == "skipped"]
    assert len(skipped) == 3 * 7 * 24
    assert "beyond grace 15m" in (skipped[0].reason or "")
    next_run = app.schedules()[0].next_run_at
    assert next_run == clock().replace(minute=0) + timedelta(hours=1)  # the first future one


def test_three_weeks_down_under_skip_fires_the_one_missed_within_grace(
    make_app: MakeApp, clock: Clock
) -> None:
    app = downtime(make_app, clock, "skip", grace=timedelta(hours=1))
    ran = [o for o in app.history(limit=1000) if o.status == "succeeded"]
    assert [o.scheduled_for for o in ran] == [clock().replace(minute=0)]


def test_three_weeks_down_under_latest_fires_exactly_one(make_app: MakeApp, clock: Clock) -> None:
    app = downtime(make_app, clock, "latest")
    history = app.history(limit=1000)
    ran = [o for o in history if o.status == "succeeded"]
    assert [o.scheduled_for for o in ran] == [clock().replace(minute=0)]
    assert sum(o.status == "skipped" for o in history) == 3 * 7 * 24 - 1


def test_all_catches_up_bounded_by_misfire_limit(make_app: MakeApp, clock: Clock) -> None:
    app = downtime(make_app, clock, "all", misfire_limit=50, overlap="allow")
    history = app.history(limit=1000)
    ran = sorted(o.scheduled_for for o in history if o.status == "succeeded")
    assert len(ran) == 50  # the newest 50, not weeks of the past
    assert ran[-1] == clock().replace(minute=0)
    assert "earlier missed occurrences" in (
        min(history, key=lambda o: o.scheduled_for).reason or ""
    )


def test_a_short_delay_within_grace_still_fires(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()

    @app.job(oncely.cron("0 9 * * *"))
    def digest(run: oncely.Run) -> None:
        pass

    app.tick()
    clock.set(clock().replace(hour=9, minute=14, second=59))
    app.tick()
    assert [o.status for o in app.history()] == ["succeeded"]


@pytest.mark.parametrize("misfire", ["skip", "latest", "all"])
def test_a_one_off_timer_runs_however_late(make_app: MakeApp, clock: Clock, misfire: str) -> None:
    app = make_app()

    @app.job(misfire=misfire)  # type: ignore[call-overload]
    def remind(run: oncely.Run) -> None:
        pass

    app.defer(remind, at=clock() + timedelta(minutes=1), key="once")
    clock.advance(days=2)
    app.tick()
    assert [o.status for o in app.history()] == ["succeeded"]


def _materialised_then_down(
    make_app: MakeApp, clock: Clock
) -> tuple[oncely.App, list[object], datetime]:
    """An hourly job whose next row (returned: its time) was written at its time, after which
    every worker went down before claiming it."""
    app = make_app()
    ran: list[object] = []

    @app.job(oncely.every(hours=1))
    def hourly(run: oncely.Run) -> None:
        ran.append(run.scheduled_for)

    clock.set(clock().replace(minute=30, second=0))
    app.tick()  # reconciles: next run on the hour
    clock.advance(minutes=30)
    app._the_engine().prepare(oncely.TickReport())  # materialised, then the fleet went down
    return app, ran, clock()


def test_an_occurrence_materialised_in_time_but_claimed_weeks_later_is_skipped_not_run(
    make_app: MakeApp, clock: Clock
) -> None:
    """Lesson 8 at claim time: every worker died right after the 09:00 row was written."""
    app, ran, written = _materialised_then_down(make_app, clock)
    # Back at hh:30: every occurrence since is beyond grace too, so none supersedes this one.
    clock.advance(weeks=3, minutes=30)
    app.tick()
    late = [o for o in app.history(limit=1000) if o.scheduled_for == written]
    assert ran == []
    assert [(o.status, o.attempts) for o in late] == [("skipped", 0)]
    assert "claimed 21d30m after its time, beyond grace 15m" in (late[0].reason or "")


def test_an_occurrence_materialised_before_downtime_is_superseded_by_the_newest_in_grace(
    make_app: MakeApp, clock: Clock
) -> None:
    app, ran, written = _materialised_then_down(make_app, clock)
    clock.advance(weeks=3, minutes=5)
    app.tick()
    (stale,) = [o for o in app.history(limit=1000) if o.scheduled_for == written]
    assert ran == [written + timedelta(weeks=3)]
    assert (stale.status, stale.attempts) == ("skipped", 0)
    newest = (written + timedelta(weeks=3)).isoformat()
    assert f"superseded by the newer occurrence at {newest}" in (stale.reason or "")
