"""A pause until a time: it ends by itself, exactly as a resume by hand at that moment would."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from _engine_support import START

import oncely
from oncely.testing import Clock

UNTIL = START + timedelta(minutes=5)  # 09:04:30, between two minutes


def _runs(app: oncely.App, key: str) -> list[tuple[datetime, str]]:
    return sorted((o.scheduled_for, o.status) for o in app.history(key=key))


def test_a_pause_ends_at_its_time_as_a_resume_by_hand_then_would(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    for key in ("timed", "by-hand"):
        app.schedule(remind, oncely.every(minutes=1), key=key)
    app.pause("timed", until=UNTIL)
    app.pause("by-hand")
    clock.set(UNTIL - timedelta(microseconds=1))
    app.tick()
    assert app.history() == []
    assert app.schedules()[1].paused_until == UNTIL  # sorted by key: by-hand, timed
    clock.set(UNTIL)
    app.resume("by-hand")
    app.tick()
    assert not any(s.paused for s in app.schedules())
    first_after = datetime(2026, 11, 30, 9, 5, tzinfo=UNTIL.tzinfo)
    clock.set(first_after)
    app.tick()
    assert _runs(app, "timed") == _runs(app, "by-hand")
    assert _runs(app, "timed")[-1] == (first_after, "succeeded")


def test_the_next_due_time_is_the_end_of_the_pause(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    app.schedule(remind, oncely.every(hours=1), key="r")
    app.pause("r", until=UNTIL)
    assert app.store.next_due_at() == UNTIL  # the worker wakes for it, not at its next run
    app.pause("r")
    assert app.store.next_due_at() is None


def test_the_end_of_a_pause_is_recorded_as_a_resume(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    app.schedule(remind, oncely.every(minutes=1), key="r")
    app.pause("r", until=UNTIL)
    clock.set(UNTIL + timedelta(seconds=2))
    app.tick()
    (resumed,) = app.store.actions(None, "r")
    assert (resumed.action, resumed.at) == ("resume", UNTIL + timedelta(seconds=2))
    assert resumed.actor.startswith("oncely (")
    assert UNTIL.isoformat() in resumed.reason
    app.tick()
    assert len(app.store.actions(None, "r")) == 1


def test_pausing_without_a_time_or_resuming_clears_the_end(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    app.schedule(remind, oncely.every(minutes=1), key="r")
    app.pause("r", until=UNTIL)
    assert app.pause("r").paused_until is None
    clock.set(UNTIL + timedelta(minutes=1))
    app.tick()
    assert app.schedules()[0].paused
    app.pause("r", until=UNTIL + timedelta(minutes=2))
    assert app.resume("r").paused_until is None
    assert app.for_tenant("acme").schedules() == []


def test_a_pause_of_a_tenant_ends_in_that_tenant(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    acme = app.for_tenant("acme")
    acme.schedule(remind, oncely.every(minutes=1), key="r")
    assert acme.pause("r", until=UNTIL).paused_until == UNTIL
    clock.set(UNTIL)
    app.tick()
    assert not acme.schedules()[0].paused
    assert [a.action for a in app.store.actions("acme", "r")] == ["resume"]


@pytest.mark.parametrize(
    ("until", "says"),
    [
        (START, "is not in the future"),
        (START - timedelta(days=1), "is not in the future"),
        (datetime(2026, 12, 1, 9, 0), "has no time zone"),
        ("tomorrow", "is not a datetime"),
    ],
)
def test_a_pause_until_a_time_that_is_no_end_is_refused(
    app: oncely.App, remind: oncely.Job, until: object, says: str
) -> None:
    app.schedule(remind, oncely.every(minutes=1), key="r")
    with pytest.raises(oncely.InvalidSchedule, match=says):
        app.pause("r", until=until)  # type: ignore[arg-type]
    assert not app.schedules()[0].paused


def test_pause_after_reached_during_a_timed_pause_lasts_until_resumed_by_hand(
    app: oncely.App, clock: Clock
) -> None:
    @app.job(pause_after=1, retries=1)
    def flaky(run: oncely.Run) -> None:
        app.pause(run.key, until=UNTIL)  # paused for an hour while this attempt runs
        raise RuntimeError("down")

    app.schedule(flaky, oncely.every(minutes=1), key="f")
    clock.set(START + timedelta(seconds=30))
    app.tick()
    (failed,) = app.history(key="f")
    assert failed.status == "failed"
    assert app.schedules()[0].paused_until is None  # the failures' pause has no end
    clock.set(UNTIL)
    app.tick()
    assert app.schedules()[0].paused
