"""Issue 21.4-5: code-declared schedules and runtime ones never take each other's keys, and
what the code declares is changed through the code."""

from __future__ import annotations

import pytest
from _engine_support import MakeApp

import oncely
from oncely.testing import Clock


def test_a_new_code_declared_job_does_not_replace_a_runtime_schedule_with_its_key(
    make_app: MakeApp, clock: Clock
) -> None:
    live = make_app()

    @live.job()
    def remind(run: oncely.Run) -> None:
        pass

    live.schedule(remind, oncely.every(hours=6), key="digest", payload={"user": 42})
    release = make_app()

    @release.job(oncely.every(minutes=1))
    def digest(run: oncely.Run) -> None:
        pass

    with pytest.raises(oncely.TickFailed) as raised:
        release.tick()
    cause = raised.value.__cause__
    assert isinstance(cause, oncely.ConfigurationError), raised.value
    assert "job 'digest'" in str(cause), cause
    assert "job 'remind'" in str(cause), cause
    (kept,) = live.schedules()
    assert (kept.job, kept.trigger, kept.payload) == ("remind", oncely.every(hours=6), {"user": 42})


def test_a_runtime_schedule_onto_a_code_declared_key_is_refused(
    make_app: MakeApp, clock: Clock
) -> None:
    release = make_app()

    @release.job(oncely.every(minutes=1))
    def digest(run: oncely.Run) -> None:
        pass

    release.tick()
    # Another process of the service, whose app object does not declare digest (a CLI, a web
    # process importing fewer modules).
    other = make_app()

    @other.job()
    def remind(run: oncely.Run) -> None:
        pass

    with pytest.raises(oncely.InvalidSchedule, match="declared in code"):
        other.schedule(remind, oncely.every(hours=6), key="digest")
    with pytest.raises(oncely.InvalidSchedule, match="declared in code"):
        other.defer(remind, at=clock(), key="digest")
    (kept,) = release.schedules()
    assert (kept.job, kept.origin) == ("digest", "code")


def test_unschedule_of_a_code_declared_job_is_refused_and_pause_outlives_a_restart(
    make_app: MakeApp, clock: Clock
) -> None:
    ran: list[int] = []

    def declare(app: oncely.App) -> None:
        @app.job(oncely.every(minutes=1))
        def digest(run: oncely.Run) -> None:
            ran.append(1)

    first = make_app()
    declare(first)
    first.tick()
    # It was removed, then put back by the next start's reconcile: "stop for good" was untrue.
    with pytest.raises(oncely.InvalidSchedule, match=r"declared in code.*pause"):
        first.unschedule("digest")
    first.pause("digest")
    restarted = make_app()
    declare(restarted)
    clock.advance(minutes=1)
    restarted.tick()
    assert ran == []
    assert [(s.key, s.paused, s.status) for s in restarted.schedules()] == [
        ("digest", True, "active")
    ]
