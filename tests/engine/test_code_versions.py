"""Issue 21.5: which release is newest is decided by when each was first seen, and that survives
retention; a process that only calls tick() says its release is live."""

from __future__ import annotations

from datetime import timedelta

from _engine_support import MakeApp

import oncely
from oncely.testing import Clock


def old_release(app: oncely.App) -> None:
    @app.job(oncely.every(hours=1))
    def digest(run: oncely.Run) -> None:
        pass


def new_release(app: oncely.App) -> None:
    @app.job(oncely.every(minutes=10))
    def digest(run: oncely.Run) -> None:
        pass

    @app.job(oncely.every(minutes=5))
    def audit(run: oncely.Run) -> None:
        pass


def schedules(app: oncely.App) -> dict[str, tuple[object, str]]:
    return {s.key: (s.trigger, s.status) for s in app.schedules()}


NEW = {
    "digest": (oncely.every(minutes=10), "active"),
    "audit": (oncely.every(minutes=5), "active"),
}


def test_an_old_release_started_after_retention_does_not_count_as_the_newest(
    make_app: MakeApp, clock: Clock
) -> None:
    old = make_app()
    old_release(old)
    old.tick()
    clock.advance(days=1)
    new = make_app()
    new_release(new)
    new.tick()
    assert schedules(new) == NEW
    clock.advance(days=40)
    new.tick()  # the live release, still running
    new.store.prune(clock() - timedelta(days=30), 1000)  # housekeeping's retention of 30 days
    # Its version row pruned, the old release registered as brand new and put its triggers back.
    restarted = make_app()
    old_release(restarted)
    restarted.tick()
    assert schedules(restarted) == NEW


def test_a_process_that_only_ticks_marks_its_release_live(make_app: MakeApp, clock: Clock) -> None:
    old = make_app()
    old_release(old)
    old.tick()
    clock.advance(seconds=1)
    new = make_app()
    new_release(new)
    for _ in range(10):
        new.tick()
        clock.advance(minutes=1)
    # Seen only at its first tick, the new release looked gone after 3 minutes: a restarting old
    # process rolled the schedules back under it.
    restarted = make_app()
    old_release(restarted)
    restarted.tick()
    assert schedules(restarted) == NEW
