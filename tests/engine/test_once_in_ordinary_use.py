"""Once per occurrence in ordinary use: edits, backfills, prunes and downtime (issue 20's cases).

Each test is named after what broke before it existed, and runs on both stores.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from _engine_support import MakeApp

import oncely
from oncely.engine import TickReport
from oncely.testing import Clock

MONDAY = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _statuses(app: oncely.App, key: str) -> dict[str, tuple[str, str | None]]:
    return {
        o.scheduled_for.strftime("%a %H:%M"): (o.status, o.reason)
        for o in app.history(key=key, limit=1000)
    }


def _recording(make_app: MakeApp) -> tuple[oncely.App, oncely.Job, list[datetime]]:
    """An app with a job scheduled at run time that records each run's scheduled time."""
    app = make_app()
    ran: list[datetime] = []

    @app.job(name="recorded")
    def recorded(run: oncely.Run) -> None:
        ran.append(run.scheduled_for)

    return app, recorded, ran


def _prepare_ahead(app: oncely.App, to: datetime) -> None:
    """What the worker does just before a due time: materialise what comes due by ``to``."""
    app._the_engine().prepare(TickReport(), ahead_to=to)


def test_a_timer_moved_away_and_back_fires_once_at_its_time(
    make_app: MakeApp, clock: Clock
) -> None:
    app, remind, ran = _recording(make_app)

    tuesday = MONDAY + timedelta(days=1)
    app.defer(remind, at=MONDAY, key="remind:42")
    app.defer(remind, at=tuesday, key="remind:42")
    app.defer(remind, at=MONDAY, key="remind:42")
    clock.set(MONDAY)
    app.tick()
    clock.set(tuesday)
    app.tick()
    assert ran == [MONDAY]


def test_a_cron_edited_inside_the_lead_window_keeps_or_replaces_its_run(
    make_app: MakeApp, clock: Clock
) -> None:
    app, digest, ran = _recording(make_app)

    app.schedule(digest, oncely.cron("0 9 * * *"), key="digest")
    clock.set(MONDAY - timedelta(seconds=1))
    _prepare_ahead(app, MONDAY)  # 09:00 is pending, a second ahead
    app.schedule(digest, oncely.cron("0 9 * * MON-FRI"), key="digest")  # still fires at 09:00
    clock.set(MONDAY + timedelta(milliseconds=200))
    app.tick()
    assert ran == [MONDAY]


def test_one_schedules_backlog_never_starves_another_schedule(
    make_app: MakeApp, clock: Clock
) -> None:
    app = make_app()

    @app.job()
    def hourly(run: oncely.Run) -> None: ...

    @app.job()
    def minutely(run: oncely.Run) -> None: ...

    clock.set(MONDAY)
    app.schedule(hourly, oncely.every(hours=1), key="hourly", tenant="big")
    app.for_tenant("big").backfill("hourly", MONDAY - timedelta(days=7), MONDAY)
    app.schedule(minutely, oncely.every(minutes=1), key="minutely", tenant="small")
    clock.set(MONDAY + timedelta(minutes=1))
    engine = app._the_engine()
    engine.prepare(TickReport())
    head = engine.claim(1)
    assert [c.key for c in head] == ["hourly"]  # the backlog's oldest runs
    for limit in (8, 64, 150):
        claims = engine.claim(limit)
        assert [c.key for c in claims] == ["minutely"], limit
        app.store.release(claims, clock())


def test_buffer_one_runs_the_buffered_occurrence_however_long_the_previous_took(
    make_app: MakeApp, clock: Clock
) -> None:
    app, other = make_app(), make_app()
    started: list[tuple[datetime, datetime]] = []
    for each in (app, other):

        @each.job(oncely.cron("0 * * * *"), overlap="buffer_one", lease=timedelta(hours=2))
        def hourly(run: oncely.Run) -> None:
            started.append((run.scheduled_for, clock()))
            if len(started) == 1:
                for _ in range(8):  # 80 minutes, the other worker ticking meanwhile
                    clock.advance(minutes=10)
                    other.tick()

    clock.set(MONDAY - timedelta(minutes=5))
    app.tick()
    clock.set(MONDAY)
    app.tick()  # 10:00 runs until 11:20; 11:00 waits for it
    app.tick()
    assert [at for at, _ in started] == [MONDAY, MONDAY + timedelta(hours=1)]
    assert started[1][1] == MONDAY + timedelta(minutes=80)
    buffered = app.history(key="hourly", since=MONDAY + timedelta(hours=1), limit=1)[0]
    assert buffered.status == "succeeded"
    assert buffered.started_at == MONDAY + timedelta(minutes=80)


def _beside_an_80_minute_report(
    make_app: MakeApp, clock: Clock, *, name: str, **options: Any
) -> tuple[oncely.App, oncely.App, list[str]]:
    """Two apps, each with job ``name`` (declared with ``options``) and a job ``report`` that
    runs 80 minutes while the other app ticks; the keys run, in order."""
    app, other = make_app(), make_app()
    ran: list[str] = []
    for each in (app, other):
        each.job(name=name, **{"lease": timedelta(hours=1), **options})(
            lambda run: ran.append(run.key)
        )

        @each.job(lease=timedelta(hours=3))
        def report(run: oncely.Run) -> None:
            ran.append(run.key)
            for _ in range(8):  # 80 minutes, the other worker ticking meanwhile
                clock.advance(minutes=10)
                other.tick()

    return app, other, ran


def test_a_success_waiting_to_be_booked_outlives_no_lease_behind_a_long_handler(
    make_app: MakeApp, clock: Clock
) -> None:
    """Found by the engine model: a tick ran a one-off, then a job with a longer lease for 80
    minutes; the one-off's success, not yet booked, lost its 1-hour lease meanwhile, and
    another worker ran it again."""
    app, other, ran = _beside_an_80_minute_report(make_app, clock, name="remind")
    clock.set(MONDAY - timedelta(minutes=5))
    app.defer("remind", at=MONDAY, key="remind:42")
    app.defer("report", at=MONDAY, key="report")
    clock.set(MONDAY)
    app.tick()
    app.tick()
    other.tick()
    assert sorted(ran) == ["remind:42", "report"]
    assert [o.status for o in app.history(key="remind:42")] == ["succeeded"]


def test_an_at_most_once_one_off_claimed_beside_a_long_handler_is_not_abandoned_unrun(
    make_app: MakeApp, clock: Clock
) -> None:
    """Found by the engine model: a tick claimed an at_most_once one-off with a job that ran
    80 minutes; the one-off waited past its 10-minute lease, and the other app's tick
    abandoned it ("the worker was lost during the call") though it had never started."""
    app, _, ran = _beside_an_80_minute_report(
        make_app, clock, name="notify", delivery="at_most_once", lease=timedelta(minutes=10)
    )
    clock.set(MONDAY - timedelta(minutes=5))
    app.tick()  # nothing due: the next claim takes the longer lease's group first
    app.defer("report", at=MONDAY, key="report")
    app.defer("notify", at=MONDAY, key="notify:7")
    clock.set(MONDAY)
    app.tick()
    app.tick()
    assert [o.status for o in app.history(key="notify:7")] == ["succeeded"]
    assert sorted(ran) == ["notify:7", "report"]


def test_a_timer_cancelled_while_its_retry_waits_runs_when_deferred_again(
    make_app: MakeApp, clock: Clock
) -> None:
    """Found by the engine model: a timer's first attempt was lost (here: failed) and its retry
    waited; the timer was cancelled, then deferred again at the same time. It read "unscheduled"
    and never ran."""
    app = make_app()
    attempts: list[int] = []

    @app.job(name="remind")
    def remind(run: oncely.Run) -> None:
        attempts.append(run.attempt)
        if run.attempt == 1:
            raise RuntimeError("the first attempt fails")

    clock.set(MONDAY)
    app.defer("remind", at=MONDAY, key="remind:9")
    app.tick()
    assert [o.status for o in app.history(key="remind:9")] == ["retrying"]
    app.unschedule("remind:9")
    app.defer("remind", at=MONDAY, key="remind:9")
    clock.advance(hours=1)
    app.tick()
    assert attempts == [1, 2]
    assert [o.status for o in app.history(key="remind:9")] == ["succeeded"]


def test_a_claim_taken_ahead_and_given_back_never_runs_early(
    make_app: MakeApp, clock: Clock
) -> None:
    app = make_app()
    ran: list[datetime] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(clock())

    clock.set(MONDAY - timedelta(minutes=1))
    app.defer(remind, at=MONDAY, key="remind")
    clock.set(MONDAY - timedelta(seconds=1))
    engine = app._the_engine()
    engine.prepare(TickReport(), ahead_to=MONDAY)
    taken = engine.claim(8, due_by=MONDAY)
    assert [c.key for c in taken] == ["remind"]
    assert app.store.release(taken, clock()) == 1
    clock.advance(milliseconds=500)
    app.tick()
    assert ran == []
    clock.set(MONDAY)
    app.tick()
    assert ran == [MONDAY]
    (done,) = app.history(key="remind")
    assert done.started_at is not None
    assert done.started_at >= MONDAY


def test_saving_the_same_rrule_again_keeps_its_series(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()

    @app.job()
    def daily(run: oncely.Run) -> None: ...

    clock.set(MONDAY.replace(hour=8))
    first = app.schedule(daily, oncely.rrule("FREQ=DAILY"), key="daily")
    assert first.next_run_at == MONDAY.replace(hour=8)  # counts from when it was saved
    clock.advance(seconds=1)
    app.tick()
    clock.set(MONDAY.replace(hour=14, minute=37))
    again = app.schedule(daily, oncely.rrule("FREQ=DAILY"), key="daily")
    assert again.next_run_at == MONDAY.replace(hour=8) + timedelta(days=1)


def test_an_rrule_with_a_count_fires_as_many_times_as_it_says(
    make_app: MakeApp, clock: Clock
) -> None:
    app, thrice, ran = _recording(make_app)

    clock.set(MONDAY)
    app.schedule(thrice, oncely.rrule("FREQ=DAILY;COUNT=3"), key="thrice")
    for day in range(4):
        clock.set(MONDAY + timedelta(days=day, seconds=1))
        app.tick()
    assert ran == [MONDAY + timedelta(days=day) for day in range(3)]


def test_saving_an_ended_rule_again_unchanged_changes_nothing(
    make_app: MakeApp, clock: Clock
) -> None:
    """Found by the engine model: code that saves its rule at every start failed once the
    series had ended ("never fires after")."""
    app, thrice, ran = _recording(make_app)

    clock.set(MONDAY)
    first = app.schedule(thrice, oncely.rrule("FREQ=HOURLY;COUNT=3"), key="thrice")
    for hour in range(4):
        clock.set(MONDAY + timedelta(hours=hour, seconds=1))
        app.tick()
    again = app.schedule(thrice, oncely.rrule("FREQ=HOURLY;COUNT=3"), key="thrice")
    assert (again.key, again.trigger, again.created_at) == (
        first.key,
        first.trigger,
        first.created_at,
    )
    app.tick()
    assert ran == [MONDAY + timedelta(hours=hour) for hour in range(3)]
    ended = oncely.rrule("FREQ=HOURLY;COUNT=3", start=MONDAY)
    with pytest.raises(oncely.InvalidSchedule, match="never fires"):
        app.schedule(thrice, ended, key="thrice-new")  # a new schedule that would never run


def test_downtime_after_an_early_materialise_runs_the_newest_under_skip(
    make_app: MakeApp, clock: Clock
) -> None:
    app = _stopped_after_an_early_materialise(make_app, clock, "skip", down=timedelta(minutes=40))
    seen = _statuses(app, "every10")
    assert seen["Mon 09:40"] == ("succeeded", None)
    assert [at for at, (status, _) in seen.items() if status == "succeeded"] == ["Mon 09:40"]
    for at, (status, reason) in seen.items():
        if at != "Mon 09:40":
            assert status == "skipped", at
            assert "overlap" not in (reason or ""), (at, reason)
            assert " ran instead" not in (reason or ""), (at, reason)


def test_downtime_after_an_early_materialise_runs_only_the_newest_under_latest(
    make_app: MakeApp, clock: Clock
) -> None:
    app = _stopped_after_an_early_materialise(make_app, clock, "latest", down=timedelta(hours=3))
    seen = _statuses(app, "every10")
    assert [at for at, (status, _) in seen.items() if status == "succeeded"] == ["Mon 12:00"]
    assert all("overlap" not in (reason or "") for _, reason in seen.values())


def test_downtime_after_an_early_materialise_runs_the_backlog_under_all(
    make_app: MakeApp, clock: Clock
) -> None:
    app = _stopped_after_an_early_materialise(make_app, clock, "all", down=timedelta(minutes=30))
    seen = _statuses(app, "every10")
    assert sorted(at for at, (status, _) in seen.items() if status == "succeeded") == [
        "Mon 09:00",
        "Mon 09:10",
        "Mon 09:20",
        "Mon 09:30",
    ]


def _stopped_after_an_early_materialise(
    make_app: MakeApp, clock: Clock, misfire: str, *, down: timedelta
) -> oncely.App:
    """09:00 of a ten-minutely job materialised a second early, then every worker stopped until
    ``down`` after 09:00; on restart ticks run until nothing is left."""

    def every10(run: oncely.Run) -> None: ...

    app = make_app()
    app.job(oncely.every(minutes=10), misfire=misfire)(every10)  # type: ignore[call-overload]
    clock.set(MONDAY - timedelta(minutes=5))
    app.tick()
    clock.set(MONDAY - timedelta(seconds=1))
    _prepare_ahead(app, MONDAY)
    app.close()
    restarted = make_app()
    restarted.job(oncely.every(minutes=10), misfire=misfire)(every10)  # type: ignore[call-overload]
    clock.set(MONDAY + down)
    for _ in range(8):
        restarted.tick()
    return restarted


def _prune_everything_finished(app: oncely.App, clock: Clock) -> None:
    """What retention does once the history is old enough: here, all of it."""
    clock.advance(days=40)
    while app.store.prune(clock() - timedelta(days=30), 1000) == 1000:
        pass


def test_a_deferred_timer_that_ran_stays_done_after_its_history_is_pruned(
    make_app: MakeApp, clock: Clock
) -> None:
    app = make_app()
    ran: list[str] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(run.idempotency_key)

    app.defer(remind, at=MONDAY, key="remind:42")
    clock.set(MONDAY)
    app.tick()
    _prune_everything_finished(app, clock)
    assert app.history(key="remind:42") == []
    app.defer(remind, at=MONDAY, key="remind:42")  # the same key and time: changes nothing
    app.tick()
    assert len(ran) == 1


def test_a_timer_that_ran_then_was_unscheduled_never_runs_again_after_a_prune(
    make_app: MakeApp, clock: Clock
) -> None:
    """Found by the engine model: unscheduled after it ran, then pruned, the same key and time
    deferred again ran a second time with the same idempotency key."""
    app = make_app()
    ran: list[str] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(run.idempotency_key)

    app.defer(remind, at=MONDAY, key="remind:42")
    clock.set(MONDAY)
    app.tick()
    app.unschedule("remind:42")
    _prune_everything_finished(app, clock)
    with pytest.raises(oncely.InvalidSchedule, match="has been pruned"):
        app.defer(remind, at=MONDAY, key="remind:42")
    app.tick()
    assert len(ran) == 1
    app.defer(remind, at=clock() + timedelta(hours=1), key="remind:42")  # a later time is fine
    clock.advance(hours=1)
    app.tick()
    assert len(ran) == 2


def test_backfill_never_reruns_an_occurrence_whose_history_was_pruned(
    make_app: MakeApp, clock: Clock
) -> None:
    app = make_app()
    ran: list[datetime] = []

    @app.job(oncely.every(hours=1))
    def hourly(run: oncely.Run) -> None:
        ran.append(run.scheduled_for)

    clock.set(MONDAY - timedelta(minutes=30))
    app.tick()
    clock.set(MONDAY + timedelta(hours=3, minutes=5))
    app.backfill("hourly", MONDAY, MONDAY + timedelta(hours=2))
    for _ in range(4):
        app.tick()
    assert sorted(ran) == [MONDAY + timedelta(hours=h) for h in range(4)]
    _prune_everything_finished(app, clock)
    with pytest.raises(oncely.InvalidSchedule, match="history has been pruned"):
        app.backfill("hourly", MONDAY, MONDAY + timedelta(hours=2))
    for _ in range(4):
        app.tick()
    assert sorted(ran)[:4] == [MONDAY + timedelta(hours=h) for h in range(4)]
    assert len([at for at in ran if at < MONDAY + timedelta(hours=4)]) == 4


def test_a_finished_keyless_timer_is_forgotten_with_its_history(
    make_app: MakeApp, clock: Clock
) -> None:
    app = make_app()

    @app.job()
    def remind(run: oncely.Run) -> None: ...

    keyless = app.defer(remind, at=MONDAY)
    keyed = app.defer(remind, at=MONDAY, key="remind:42")
    clock.set(MONDAY)
    app.tick()
    _prune_everything_finished(app, clock)
    assert [s.key for s in app.schedules()] == [keyed.key]
    assert keyless.key != keyed.key


def test_listing_schedules_is_filtered_and_paged(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()

    @app.job()
    def remind(run: oncely.Run) -> None: ...

    @app.job()
    def bill(run: oncely.Run) -> None: ...

    for n in range(12):
        for tenant in (None, "acme"):
            scope = app if tenant is None else app.for_tenant(tenant)
            scope.defer(remind, at=MONDAY, key=f"remind:{n:02d}")
            scope.defer(bill, at=MONDAY, key=f"bill:{n:02d}")
    everything = app.schedules(limit=None)
    assert len(everything) == 48
    pages, after = [], None
    while True:
        page = app.schedules(limit=10, after=after)
        pages += page
        if len(page) < 10:
            break
        after = page[-1]
    assert [(s.tenant, s.key) for s in pages] == [(s.tenant, s.key) for s in everything]
    assert len(app.schedules()) == 48  # all of them, unless a page is asked for
    acme = app.for_tenant("acme").schedules(job=remind, limit=5)
    assert [s.key for s in acme] == [f"remind:{n:02d}" for n in range(5)]
    assert {s.job for s in app.schedules(key_prefix="bill:1", limit=None)} == {"bill"}
    assert len(app.schedules(key_prefix="bill:1", limit=None)) == 4
    app.unschedule("bill:05")
    assert (None, "bill:05") not in {(s.tenant, s.key) for s in app.schedules()}
    assert [(s.tenant, s.key) for s in app.schedules(status="removed")] == [(None, "bill:05")]
    with pytest.raises(oncely.OncelyError, match="limit"):
        app.schedules(limit=0)


def test_planning_ahead_never_turns_an_occurrence_due_now_into_a_misfire(
    make_app: MakeApp, clock: Clock
) -> None:
    """Found by the engine model: materialised ahead to 10:30 at 10:00:01, the 10:00 occurrence
    was judged against 10:30, "30m late, beyond grace 15m", and skipped."""
    app = make_app()
    ran: list[datetime] = []

    @app.job(oncely.every(hours=1))
    def hourly(run: oncely.Run) -> None:
        ran.append(run.scheduled_for)

    clock.set(MONDAY - timedelta(minutes=45))
    app.tick()
    clock.set(MONDAY + timedelta(seconds=1))
    _prepare_ahead(app, MONDAY + timedelta(minutes=30))
    app.tick()
    assert ran == [MONDAY]
