"""One regression test per incident in DESIGN.md's lessons that the engine answers for.

Each name says which lesson; the detailed suites live beside this file (test_exactly_once,
test_crash, test_retries, test_misfire, test_tenants). Lesson 6's is in test_invalid_rule.py.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from datetime import datetime, timedelta

import pytest
from _engine_support import MakeApp

import oncely
from oncely.testing import Clock


def test_lesson_01_hourly_in_code_is_not_hourly_per_instance(
    make_app: MakeApp, clock: Clock
) -> None:
    fired: Counter[str] = Counter()
    lock = threading.Lock()
    instances = [make_app() for _ in range(4)]  # four copies of the service
    for app in instances:

        @app.job(oncely.every(hours=1))
        def hourly(run: oncely.Run) -> None:
            with lock:
                fired[run.idempotency_key] += 1

    for app in instances:
        app.tick()  # each instance starts: its code-declared schedule is reconciled
    clock.set(clock().replace(minute=0, second=1))
    for _ in range(6):
        clock.advance(hours=1)
        threads = [threading.Thread(target=app.tick) for app in instances]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(fired) == 6
    assert set(fired.values()) == {1}


def test_lesson_02_a_crashed_claim_expires_instead_of_running_forever(
    app: oncely.App, clock: Clock
) -> None:
    @app.job()
    def export(run: oncely.Run) -> None:
        pass

    app.defer(export, at=clock(), key="e")
    claim = app.store.claim_due(
        owner="gone#1",
        lease=timedelta(minutes=5),
        limit=1,
        now=clock(),
        jobs=["export"],
        reclaim=["export"],
        serial=["export"],
    )
    assert len(claim) == 1  # ...and its worker dies without a word
    clock.advance(minutes=5)
    app.tick()
    (row,) = app.history()
    assert (row.status, row.attempts) == ("succeeded", 2)


def test_lesson_03_handlers_get_an_idempotency_key_stable_across_attempts(
    app: oncely.App, clock: Clock
) -> None:
    keys: list[str] = []

    @app.job()
    def send(run: oncely.Run) -> None:
        keys.append(run.idempotency_key)
        if run.attempt == 1:
            raise ConnectionError("smtp timeout after the mail was handed over")

    app.defer(send, at=clock(), key="mail:42")
    app.tick()
    clock.advance(hours=1)
    app.tick()
    assert len(keys) == 2
    assert keys[0] == keys[1]


def test_lesson_04_a_terminal_failure_is_never_retried(app: oncely.App, clock: Clock) -> None:
    calls: list[int] = []

    @app.job(retries=5)
    def refund(run: oncely.Run) -> None:
        calls.append(run.attempt)
        raise oncely.Terminal("refund already issued upstream")

    app.defer(refund, at=clock(), key="r")
    for _ in range(3):
        app.tick()
        clock.advance(hours=2)
    assert calls == [1]


def test_lesson_05_an_always_on_job_is_not_admitted_every_tick(
    app: oncely.App, clock: Clock
) -> None:
    # 850 duplicate emails came from an admission clause whose NULL arm admitted everything.
    # Here: an ended schedule (next run NULL), a finished occurrence (lease NULL) and a history
    # filter left NULL must admit nothing to run again, however often the app ticks.
    sent: list[str] = []

    @app.job()
    def email(run: oncely.Run) -> None:
        sent.append(run.key)

    app.defer(email, at=clock(), key="welcome")
    for _ in range(20):
        app.tick()
        clock.advance(minutes=7)
    assert sent == ["welcome"]
    assert app.schedules()[0].next_run_at is None
    assert len(app.history(status=None)) == 1


def test_lesson_07_a_callers_end_never_extends_a_rules_own_until(
    app: oncely.App, clock: Clock
) -> None:
    @app.job(overlap="allow")
    def remind(run: oncely.Run) -> None:
        pass

    saved = clock()
    until = (saved + timedelta(days=2)).strftime("%Y%m%dT%H%M%SZ")
    app.schedule(
        remind,
        oncely.rrule(f"FREQ=DAILY;UNTIL={until}"),
        key="r",
        end=clock() + timedelta(days=30),
    )
    for _ in range(10):
        clock.advance(days=1)
        app.tick()
    # The start (when it was saved), and each day through UNTIL: nothing after it.
    times = sorted(o.scheduled_for for o in app.history(key="r"))
    assert times == [saved + timedelta(days=n) for n in range(3)]


def test_lesson_08_downtime_never_replays_weeks_of_the_past(app: oncely.App, clock: Clock) -> None:
    ran: list[datetime] = []

    @app.job(oncely.every(minutes=10))
    def poll(run: oncely.Run) -> None:
        ran.append(run.scheduled_for)

    app.tick()
    assert ran == []  # 08:59:30: the first occurrence, 09:00, is not due yet
    clock.advance(weeks=2)  # 08:59:30 two weeks on: 08:50 was missed 9.5 minutes ago
    app.tick()
    newest = clock() - timedelta(minutes=9, seconds=30)
    # The newest missed occurrence is within grace (15 minutes): it runs, once, and nothing older.
    assert ran == [newest]
    history = app.history(key="poll", limit=1000)
    assert [o.scheduled_for for o in history if o.status == "succeeded"] == [newest]
    older = [o for o in history if o.scheduled_for < newest]
    assert older, "the missed occurrences are recorded, not forgotten"
    assert {o.status for o in older} == {"skipped"}


def test_lesson_11_a_failing_tick_step_stops_the_tick(app: oncely.App, clock: Clock) -> None:
    ran: list[str] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(run.key)

    app.defer(remind, at=clock(), key="waiting")  # already pending: the run step would take it
    app.schedule(remind, oncely.every(minutes=1), key="due")
    refuse(app)
    clock.advance(minutes=1)
    with pytest.raises(oncely.TickFailed) as failed:
        app.tick()
    assert failed.value.step == "materialise"
    assert isinstance(failed.value.__cause__, oncely.StoreError)
    assert ran == []  # the run step did not go on after the failed one
    assert app.schedules()[0].next_run_at is not None


def refuse(app: oncely.App, event: str = "INSERT", table: str = "oncely_occurrences") -> None:
    """A database fault: every ``event`` (INSERT, UPDATE) on ``table`` fails inside the store."""
    with app.store.transaction() as connection:
        if app.store.dialect == "sqlite":
            connection.execute(
                f"CREATE TRIGGER refuse BEFORE {event} ON {table} "
                "BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
            )
        else:
            connection.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'injected fault'; END $$"
            )
            connection.execute(
                f"CREATE TRIGGER refuse BEFORE {event} ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )


def test_lesson_11_a_failing_reconcile_step_is_named_and_stops_the_tick(
    app: oncely.App, clock: Clock
) -> None:
    ran: list[str] = []

    @app.job(oncely.every(minutes=1))
    def sync(run: oncely.Run) -> None:
        ran.append(run.key)

    refuse(app, "INSERT", "oncely_schedules")  # the code-declared schedule cannot be saved
    with pytest.raises(oncely.TickFailed) as failed:
        app.tick()
    assert failed.value.step == "reconcile"
    assert "tick step 'reconcile' failed and the steps after it did not run" in str(failed.value)
    assert isinstance(failed.value.__cause__, oncely.StoreError)
    assert (ran, app.schedules()) == ([], [])


def test_lesson_11_a_failing_abandon_step_is_named_and_stops_the_tick(
    make_app: MakeApp, clock: Clock
) -> None:
    lost, app = make_app(), make_app()
    ran: list[str] = []
    for each in (lost, app):

        @each.job(delivery="at_most_once")
        def once(run: oncely.Run) -> None:
            ran.append(run.key)

    app.tick()  # reconciled: the next tick starts at the abandon step
    lost.defer("once", at=clock(), key="lost")
    assert [c.key for c in lost._the_engine().claim(1)] == ["lost"]  # then the process dies
    clock.advance(minutes=6)  # its 5-minute lease has expired: the abandon step takes it up
    app.defer("once", at=clock(), key="waiting")  # the run step would take it
    refuse(app, "UPDATE")
    with pytest.raises(oncely.TickFailed) as failed:
        app.tick()
    assert failed.value.step == "abandon"
    assert isinstance(failed.value.__cause__, oncely.StoreError)
    assert ran == []
    assert {o.key: o.status for o in app.history()} == {"lost": "running", "waiting": "pending"}


def test_lesson_11_a_failing_run_step_is_named(app: oncely.App, clock: Clock) -> None:
    ran: list[str] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(run.key)

    app.tick()  # reconciled
    app.defer(remind, at=clock(), key="waiting")
    refuse(app, "UPDATE")  # the claim cannot take the occurrence
    with pytest.raises(oncely.TickFailed) as failed:
        app.tick()
    assert failed.value.step == "run"
    assert isinstance(failed.value.__cause__, oncely.StoreError)
    assert ran == []
    assert [o.status for o in app.history()] == ["pending"]


def test_lesson_14_one_tenants_schedules_are_invisible_to_another(
    app: oncely.App, clock: Clock
) -> None:
    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    app.for_tenant("acme").schedule(remind, oncely.every(hours=1), key="r")
    assert app.for_tenant("globex").schedules() == []
    assert [s.tenant for s in app.schedules()] == ["acme"]


def test_lesson_09_an_rrule_without_until_or_count_stops_after_max_span(
    app: oncely.App, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    @app.job(overlap="allow")
    def nag(run: oncely.Run) -> None:
        pass

    key = f"user-typed:{uuid.uuid4().hex[:8]}"  # the stop is logged once per schedule and process
    start = clock()
    app.schedule(nag, oncely.rrule("FREQ=DAILY", start=start), key=key)
    with caplog.at_level(logging.ERROR, logger="oncely"):
        for _ in range(372):
            clock.advance(days=1)
            app.tick()
    history = app.history(key=key, limit=1000)
    # Daily after the start, up to and including 366 days from it, then never again; each ran.
    assert sorted(o.scheduled_for for o in history) == [
        start + timedelta(days=n) for n in range(1, 367)
    ]
    assert {o.status for o in history} == {"succeeded"}
    (schedule,) = app.schedules()
    assert schedule.status == "ended"
    assert any("max_span" in r.getMessage() for r in caplog.records)
