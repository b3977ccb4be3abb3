"""Overlap: a new occurrence comes due while the previous one of its schedule still runs."""

from __future__ import annotations

from _engine_support import MakeApp

import oncely
from oncely.engine import TickReport
from oncely.testing import Clock


def overlapping(make_app: MakeApp, clock: Clock, overlap: str) -> tuple[oncely.App, list[str]]:
    """A minutely job whose first run lasts three minutes, with two other apps ticking meanwhile."""
    app, other = make_app(), make_app()
    started: list[str] = []
    for each in (app, other):

        @each.job(oncely.every(minutes=1), overlap=overlap)  # type: ignore[call-overload]
        def sync(run: oncely.Run) -> None:
            started.append(run.scheduled_for.strftime("%H:%M"))
            if len(started) == 1:
                for _ in range(3):  # while the first run lasts, time passes and the other ticks
                    clock.advance(minutes=1)
                    other.tick()

    other.tick()
    clock.set(clock().replace(hour=9, minute=0, second=0))
    app.tick()
    clock.advance(seconds=1)
    app.tick()
    return app, started


def test_skip_records_the_occurrences_that_came_due_while_it_ran(
    make_app: MakeApp, clock: Clock
) -> None:
    app, started = overlapping(make_app, clock, "skip")
    assert started == ["09:00"]
    skipped = [o for o in app.history() if o.status == "skipped"]
    assert len(skipped) == 3
    assert all("overlap" in (o.reason or "") for o in skipped)


def test_buffer_one_runs_one_right_after(make_app: MakeApp, clock: Clock) -> None:
    app, started = overlapping(make_app, clock, "buffer_one")
    assert started == ["09:00", "09:01"]
    assert sum(o.status == "skipped" for o in app.history()) == 2


def test_allow_runs_them_alongside(make_app: MakeApp, clock: Clock) -> None:
    _app, started = overlapping(make_app, clock, "allow")
    assert started == ["09:00", "09:01", "09:02", "09:03"]


def _ahead(make_app: MakeApp, clock: Clock, *, previous_lasts: bool) -> tuple[oncely.App, dict]:
    """09:00 runs; 0.5 s before 09:01 another worker materialises 09:01 ahead; at 09:01:00.5 it
    claims. ``previous_lasts``: 09:00 still runs then; else it finished at 09:00:59.8."""
    app, other = make_app(), make_app()
    seen: dict[str, object] = {}
    for each in (app, other):

        @each.job(oncely.every(minutes=1), overlap="skip")
        def sync(run: oncely.Run) -> None:
            if run.scheduled_for.minute != 0:
                return
            clock.set(clock().replace(minute=0, second=59, microsecond=500_000))
            engine = other._the_engine()
            engine.prepare(
                TickReport(), ahead_to=clock().replace(minute=1, second=0, microsecond=0)
            )
            seen["ahead"] = {o.scheduled_for.minute: o.status for o in other.history()}
            if previous_lasts:
                clock.set(clock().replace(minute=1, second=0, microsecond=500_000))
                seen["claimed"] = engine.claim(10)
            else:
                clock.set(clock().replace(second=59, microsecond=800_000))

    other.tick()
    clock.set(clock().replace(hour=9, minute=0, second=0, microsecond=0))
    app.tick()
    return other, seen


def test_one_materialised_ahead_is_skipped_if_the_previous_still_runs_at_its_time(
    make_app: MakeApp, clock: Clock
) -> None:
    other, seen = _ahead(make_app, clock, previous_lasts=True)
    assert seen["ahead"] == {0: "running", 1: "pending"}  # not judged before its time
    assert seen["claimed"] == []
    by_minute = {o.scheduled_for.minute: o for o in other.history()}
    assert by_minute[1].status == "skipped"
    assert "overlap" in (by_minute[1].reason or "")
    assert by_minute[0].status == "succeeded"


def test_one_materialised_ahead_runs_if_the_previous_finished_by_its_time(
    make_app: MakeApp, clock: Clock
) -> None:
    other, seen = _ahead(make_app, clock, previous_lasts=False)
    assert seen["ahead"] == {0: "running", 1: "pending"}
    clock.set(clock().replace(minute=1, second=0, microsecond=0))
    other.tick()
    statuses = {o.scheduled_for.minute: o.status for o in other.history()}
    assert statuses[0] == statuses[1] == "succeeded"
