"""Overlap: a new occurrence comes due while the previous one of its schedule still runs."""

from __future__ import annotations

from _engine_support import MakeApp

import oncely
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
