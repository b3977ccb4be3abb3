"""The app's operations on schedules: upsert, defer, trigger, backfill, pause, unschedule, and
reconciling code-declared schedules on start."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from _engine_support import MakeApp

import oncely
from oncely.engine.reconcile import LIVE
from oncely.testing import Clock


def test_saving_the_same_schedule_again_keeps_its_next_run(app: oncely.App, clock: Clock) -> None:
    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    rule = oncely.rrule("FREQ=DAILY;BYHOUR=9;BYMINUTE=0", tz="Europe/Paris")
    first = app.schedule(remind, rule, key="r", payload={"user": 1})
    clock.advance(hours=20)
    again = app.schedule(remind, rule.with_start(first.created_at), key="r", payload={"user": 2})
    assert again.next_run_at == first.next_run_at
    assert again.payload == {"user": 2}


def test_a_changed_trigger_replaces_the_future_without_replay(
    app: oncely.App, clock: Clock
) -> None:
    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    app.schedule(remind, oncely.every(hours=1), key="r")
    clock.advance(hours=3)  # three runs due, none ran; now 11:59:30
    changed = app.schedule(remind, oncely.every(minutes=30), key="r")
    noon = clock().replace(hour=12, minute=0, second=0)
    assert changed.next_run_at == noon  # the new trigger's first future time
    app.tick()
    assert app.history() == []  # the old trigger's past is not replayed
    clock.set(noon)
    app.tick()
    assert [(o.scheduled_for, o.status) for o in app.history()] == [(noon, "succeeded")]


def test_defer_is_idempotent_by_key_and_a_new_time_replaces_it(
    app: oncely.App, clock: Clock
) -> None:
    ran: list[datetime] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(run.scheduled_for)

    when = clock() + timedelta(minutes=5)
    for _ in range(3):
        app.defer(remind, at=when, key="once")
    later = when + timedelta(minutes=5)
    app.defer(remind, at=later, key="once")
    clock.set(later)
    app.tick()
    assert ran == [later]
    statuses = {o.scheduled_for: (o.status, o.reason) for o in app.history()}
    assert statuses[when][0] == "skipped"
    assert "superseded" in (statuses[when][1] or "")


def test_trigger_runs_once_now_besides_the_schedule(app: oncely.App, clock: Clock) -> None:
    @app.job(oncely.cron("0 9 * * *"))
    def digest(run: oncely.Run) -> None:
        pass

    app.tick()
    assert app.trigger("digest") == 1
    app.tick()
    (row,) = app.history()
    assert (row.origin, row.status, row.scheduled_for) == ("trigger", "succeeded", clock())


def test_backfill_creates_each_past_occurrence_once(app: oncely.App, clock: Clock) -> None:
    ran: list[datetime] = []

    @app.job(oncely.cron("0 * * * *"), overlap="allow")
    def hourly(run: oncely.Run) -> None:
        ran.append(run.scheduled_for)

    app.tick()
    since = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)
    until = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
    assert app.backfill("hourly", since, until) == 6
    assert app.backfill("hourly", since, until) == 0
    app.tick()
    assert app.backfill("hourly", since, until) == 0
    assert sorted(ran) == [since + timedelta(hours=h) for h in range(6)]


def test_backfill_runs_what_a_misfire_skipped(app: oncely.App, clock: Clock) -> None:
    @app.job(oncely.cron("0 * * * *"), overlap="allow")
    def hourly(run: oncely.Run) -> None:
        pass

    app.tick()
    clock.advance(hours=5)
    app.tick()
    skipped = [o.scheduled_for for o in app.history() if o.status == "skipped"]
    assert len(skipped) == 5
    assert app.backfill("hourly", min(skipped), max(skipped)) == 5
    app.tick()
    assert app.backfill("hourly", min(skipped), max(skipped)) == 0
    backfilled = [o for o in app.history() if o.origin == "backfill"]
    assert len(backfilled) == 5
    assert {o.status for o in backfilled} == {"succeeded"}
    assert all("skipped before: misfire" in (o.reason or "") for o in backfilled)


def test_pause_holds_and_resume_releases(app: oncely.App, clock: Clock) -> None:
    @app.job(oncely.every(minutes=1))
    def sync(run: oncely.Run) -> None:
        pass

    app.tick()
    app.pause("sync")
    clock.advance(minutes=3)
    app.tick()
    assert app.history() == []
    app.resume("sync")
    app.tick()
    assert next(o.status for o in app.history()) == "succeeded"


def test_unschedule_stops_firing_and_keeps_history(app: oncely.App, clock: Clock) -> None:
    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    app.schedule(remind, oncely.every(minutes=1), key="r")
    clock.advance(minutes=1)
    app.tick()
    app.unschedule("r")
    clock.advance(minutes=5)
    app.tick()
    assert [o.status for o in app.history(key="r")] == ["succeeded"]
    assert app.schedules() == []


def test_unscheduling_records_what_was_waiting_as_skipped(app: oncely.App, clock: Clock) -> None:
    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    app.defer(remind, at=clock() + timedelta(hours=1), key="later")
    app.unschedule("later")
    clock.advance(hours=2)
    app.tick()
    (row,) = app.history(key="later")
    assert (row.status, row.attempts) == ("skipped", 0)
    assert "unscheduled" in (row.reason or "")


def test_a_job_removed_from_code_stops_and_stays_in_history(
    make_app: MakeApp, clock: Clock
) -> None:
    old = make_app()

    @old.job(oncely.every(minutes=1))
    def legacy(run: oncely.Run) -> None:
        pass

    old.tick()
    clock.advance(minutes=1)
    old.tick()
    old.close()

    new = make_app()

    @new.job(oncely.every(minutes=1))
    def current(run: oncely.Run) -> None:
        pass

    clock.advance(minutes=1)
    new.tick()
    assert [s.key for s in new.schedules()] == ["current"]
    assert [o.status for o in new.history(key="legacy")] == ["succeeded"]


def test_a_changed_code_trigger_replaces_the_future_on_start(
    make_app: MakeApp, clock: Clock
) -> None:
    first = make_app()

    @first.job(oncely.cron("0 9 * * *"))
    def digest(run: oncely.Run) -> None:
        pass

    first.tick()
    assert first.schedules()[0].next_run_at == clock().replace(hour=9, minute=0, second=0)
    first.close()
    second = make_app()

    def evening(run: oncely.Run) -> None:
        pass

    second.job(oncely.cron("0 18 * * *"), name="digest")(evening)

    second.tick()
    assert second.schedules()[0].next_run_at == clock().replace(hour=18, minute=0, second=0)


def test_an_rrule_end_applies_only_without_until_or_count(app: oncely.App, clock: Clock) -> None:
    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    end = clock() + timedelta(days=2)
    until = (clock() + timedelta(days=5)).strftime("%Y%m%dT%H%M%SZ")
    bounded = oncely.rrule(f"FREQ=DAILY;UNTIL={until}")
    app.schedule(remind, bounded, key="until", end=end)
    app.schedule(remind, oncely.rrule("FREQ=DAILY"), key="open", end=end)
    by_key = {s.key: s.trigger for s in app.schedules()}
    assert len(list(by_key["until"].between(clock(), clock() + timedelta(days=9)))) == 5  # type: ignore[union-attr]
    assert len(list(by_key["open"].between(clock(), clock() + timedelta(days=9)))) == 2  # type: ignore[union-attr]


def test_async_handlers_run_on_the_engines_own_loop(app: oncely.App, clock: Clock) -> None:
    seen: list[tuple[str, int]] = []

    @app.job()
    async def remind(run: oncely.Run) -> None:
        await asyncio.sleep(0)
        seen.append((run.key, run.attempt))
        if run.attempt == 1:
            raise ConnectionError("first try fails")

    app.defer(remind, at=clock(), key="a")
    app.tick()
    (row,) = app.history()
    assert row.status == "retrying"
    clock.set(row.retry_at)  # type: ignore[arg-type]

    async def from_async_code() -> None:
        app.tick()  # a tick called from a running event loop still runs async handlers

    asyncio.run(from_async_code())
    assert seen == [("a", 1), ("a", 2)]
    assert app.history()[0].status == "succeeded"


def _deploy(make_app: MakeApp, version: int) -> oncely.App:
    """Version 1: `report` every 2 min and `legacy` every minute. Version 2: `report` every
    3 min, `legacy` removed, `fresh` added."""
    app = make_app()

    def handler(run: oncely.Run) -> None:
        pass

    app.job(oncely.every(minutes=2 if version == 1 else 3), name="report")(handler)
    app.job(oncely.every(minutes=1), name="legacy" if version == 1 else "fresh")(handler)
    return app


def _declared(app: oncely.App) -> dict[str, object]:
    return {s.key: s.trigger and s.trigger.to_spec() for s in app.schedules()}


def test_an_old_version_started_mid_deploy_does_not_put_its_triggers_back(
    make_app: MakeApp, clock: Clock
) -> None:
    _deploy(make_app, 1).tick()
    clock.advance(minutes=1)
    new = _deploy(make_app, 2)
    new.tick()
    deployed = _declared(new)
    assert set(deployed) == {"report", "fresh"}
    clock.advance(minutes=1)
    restarted = _deploy(make_app, 1)  # an old instance restarts while the new one runs
    restarted.tick()
    restarted._the_engine().reconciler.check()
    assert _declared(restarted) == deployed


def test_a_rollback_applies_the_old_version_once_no_new_worker_is_left(
    make_app: MakeApp, clock: Clock
) -> None:
    _deploy(make_app, 1).tick()
    clock.advance(minutes=1)
    _deploy(make_app, 2).tick()
    clock.advance(minutes=1)
    old = _deploy(make_app, 1)
    old.tick()
    assert set(_declared(old)) == {"report", "fresh"}  # the new version is still live
    clock.advance(LIVE)  # no worker of the new version has said it is live since
    old._the_engine().reconciler.check()
    assert _declared(old) == {
        "report": oncely.every(minutes=2).to_spec(),
        "legacy": oncely.every(minutes=1).to_spec(),
    }
