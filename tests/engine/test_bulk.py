"""Issue 25: `defer_many` and `schedule_many` keep every guarantee of `defer` and `schedule`:
the same checks, the same idempotency by key, all or nothing, an error naming the bad item."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from _engine_support import MakeApp

import oncely
from oncely.store.saving import SAVE_CHUNK
from oncely.testing import Clock


def _snapshot(app: oncely.App) -> tuple[list[object], list[object]]:
    schedules = [
        (s.tenant, s.key, s.job, s.trigger, s.next_run_at, s.payload, s.status)
        for s in app.schedules()
    ]
    history = [
        (o.tenant, o.key, o.scheduled_for, o.status, o.attempts) for o in app.history(limit=10_000)
    ]
    return schedules, history


def _timers(clock: Clock, count: int, prefix: str = "t") -> list[dict[str, object]]:
    return [
        {"at": clock() + timedelta(minutes=n + 1), "key": f"{prefix}{n}", "payload": {"n": n}}
        for n in range(count)
    ]


def test_deferring_the_same_batch_twice_changes_nothing(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    items = _timers(clock, 50)
    first = app.defer_many(remind, items)
    assert [s.key for s in first] == [f"t{n}" for n in range(50)]
    before = _snapshot(app)
    assert len(before[1]) == 50
    clock.advance(timedelta(seconds=5))
    app.defer_many(remind, items)
    assert _snapshot(app) == before


def test_a_batch_runs_each_timer_once(app: oncely.App, clock: Clock) -> None:
    ran: list[object] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(run.payload["n"])

    app.defer_many(remind, _timers(clock, 20))
    keyless = [{"at": clock() + timedelta(minutes=1), "payload": {"n": 100 + n}} for n in range(5)]
    app.defer_many(remind, keyless)
    clock.advance(timedelta(minutes=30))
    app.tick()
    app.tick()
    assert sorted(ran) == [*range(20), *range(100, 105)]


def test_an_invalid_item_rejects_the_whole_call_and_names_the_item(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    items = _timers(clock, 5)
    items[3] = {"at": datetime(2026, 12, 1, 9, 0), "key": "naive"}  # no time zone
    with pytest.raises(oncely.NaiveDatetime, match=r"^item 3 \(key 'naive'\): "):
        app.defer_many(remind, items)
    items[3] = {"at": clock(), "key": "bad-payload", "payload": {"x": float("nan")}}
    with pytest.raises(oncely.InvalidPayload, match=r"^item 3 \(key 'bad-payload'\): "):
        app.defer_many(remind, items)
    items[3] = {"at": clock(), "key": "t3", "when": clock()}
    with pytest.raises(oncely.InvalidSchedule, match=r"item 3 \(key 't3'\): when is not"):
        app.defer_many(remind, items)
    assert app.schedules() == []
    assert app.history() == []


def test_an_item_refused_by_the_store_rejects_the_whole_call(
    make_app: MakeApp, clock: Clock
) -> None:
    app = make_app()

    @app.job(oncely.every(minutes=1))
    def digest(run: oncely.Run) -> None:
        pass

    app.tick()  # saves digest's code-declared schedule
    other = make_app()  # a process whose app does not declare digest

    @other.job()
    def remind(run: oncely.Run) -> None:
        pass

    items = [*_timers(clock, 3), {"at": clock(), "key": "digest"}]
    with pytest.raises(oncely.InvalidSchedule, match=r"^item 3 \(key 'digest'\): .*declared in"):
        other.defer_many(remind, items)
    assert [s.key for s in other.schedules()] == ["digest"]


def test_a_batch_larger_than_a_chunk_is_still_all_or_nothing(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    app.defer(remind, at=clock() + timedelta(days=1), key="last")
    app.store.prune(clock(), 1000)
    count = SAVE_CHUNK * 2 + 10
    items = _timers(clock, count)
    # Refused by the store in the last chunk, after the first two were written. A day back: on
    # PostgreSQL the horizon is the start of the day (whole days go, Store.prune).
    items[-1] = {"at": clock() - timedelta(days=1), "key": "last"}
    with pytest.raises(oncely.InvalidSchedule, match=rf"^item {count - 1} \(key 'last'\)"):
        app.defer_many(remind, items)
    assert [s.key for s in app.schedules()] == ["last"]
    items[-1] = {"at": clock() + timedelta(days=1), "key": "last"}
    saved = app.defer_many(remind, items)
    assert len(saved) == count
    assert len(app.schedules()) == count


def test_a_timer_moved_before_the_history_horizon_is_refused_in_a_batch(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    app.defer(remind, at=clock() + timedelta(days=1), key="t0")
    app.store.prune(clock(), 1000)  # history before now may be gone
    items = [{"at": clock() + timedelta(hours=1), "key": "t1"},
             {"at": clock() - timedelta(days=1), "key": "t0"}]  # fmt: skip
    with pytest.raises(oncely.InvalidSchedule, match=r"^item 1 \(key 't0'\): .*pruned"):
        app.defer_many(remind, items)
    assert [s.key for s in app.schedules()] == ["t0"]


def test_two_items_of_one_key_are_refused(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    items = [*_timers(clock, 3), {"at": clock(), "key": "t1"}]
    with pytest.raises(oncely.InvalidSchedule, match="items 1 and 3 both have key 't1'"):
        app.defer_many(remind, items)
    assert app.schedules() == []


def test_schedule_many_saves_like_schedule_and_keeps_next_runs_when_saved_again(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    items = [
        {"trigger": oncely.every(hours=1), "key": "hourly", "payload": {"u": 1}},
        {"trigger": oncely.rrule("FREQ=DAILY;COUNT=3"), "key": "daily", "tenant": "acme"},
        {"trigger": oncely.cron("0 9 * * *"), "key": "morning"},
    ]
    saved = app.schedule_many(remind, items)
    assert [(s.key, s.tenant) for s in saved] == [
        ("hourly", None),
        ("daily", "acme"),
        ("morning", None),
    ]
    before = _snapshot(app)
    clock.advance(timedelta(minutes=10))
    app.schedule_many(remind, items)
    assert _snapshot(app) == before
    items[2] = {"trigger": oncely.cron("0 9 * * *"), "key": "morning", "end": clock()}
    with pytest.raises(oncely.InvalidSchedule, match=r"^item 2 \(key 'morning'\): end= applies"):
        app.schedule_many(remind, items)


def test_a_tenant_view_writes_its_items_to_its_tenant_only(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    acme = app.for_tenant("acme")
    acme.defer_many(remind, _timers(clock, 3))
    assert {s.tenant for s in app.schedules()} == {"acme"}
    with pytest.raises(oncely.TenantMismatch, match=r"^item 1 \(key 'x'\): .*tenant 'other'"):
        acme.defer_many(remind, [{"at": clock(), "key": "w"},
                                 {"at": clock(), "key": "x", "tenant": "other"}])  # fmt: skip
    saved = acme.schedule_many(remind, [{"trigger": oncely.every(hours=1), "key": "h"}])
    assert saved[0].tenant == "acme"
    assert app.for_tenant("other").schedules() == []


def test_items_that_are_not_a_list_of_dicts_are_refused(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    with pytest.raises(oncely.ConfigurationError, match="is not a list of items"):
        app.defer_many(remind, {"at": clock()})  # type: ignore[arg-type]
    with pytest.raises(oncely.InvalidSchedule, match=r"^item 1 \(no key\): .* is not a dict"):
        app.defer_many(remind, [{"at": clock()}, clock()])  # type: ignore[list-item]
    with pytest.raises(oncely.InvalidSchedule, match=r"^item 0 \(key 'k'\): it has no trigger"):
        app.schedule_many(remind, [{"key": "k"}])
    assert app.defer_many(remind, []) == []


def test_two_batches_of_the_same_new_keys_in_opposite_orders_both_succeed(
    postgres_url: str, clock: Clock
) -> None:
    apps = [oncely.App(postgres_url, clock=clock) for _ in range(2)]
    for app in apps:

        @app.job()
        def remind(run: oncely.Run) -> None:
            pass

        assert app.store.dialect == "postgres"
    items = _timers(clock, SAVE_CHUNK * 3)
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def save(app: oncely.App, batch: list[dict[str, object]]) -> None:
        start.wait()
        try:
            app.defer_many("remind", batch)
        except oncely.OncelyError as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=save, args=(apps[0], items)),
        threading.Thread(target=save, args=(apps[1], items[::-1])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        assert len(apps[0].schedules()) == len(items)
        assert len(apps[0].history(limit=10_000)) == len(items)
    finally:
        for app in apps:
            app.close()
