"""Store contract, occurrences: each (schedule, time) recorded once, next run moved by CAS."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg

from oncely import every
from oncely.model import Materialisation, Planned
from oncely.recurrence import Instance
from oncely.store import Store, open_store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
TRIGGER = every(hours=1)


def at(hours: int) -> datetime:
    return NOW + hours * HOUR


def planned(*hours: int, status: str = "pending", reason: str | None = None) -> list[Planned]:
    instances = [TRIGGER.next_instance_after(at(h) - timedelta(seconds=1)) for h in hours]
    return [Planned(i, status, reason) for i in instances if i is not None]  # type: ignore[arg-type]


def schedule(store: Store, key: str = "sync", tenant: str | None = None) -> None:
    store.save_schedule(
        tenant=tenant,
        key=key,
        job="sync",
        origin="code",
        trigger=TRIGGER,
        payload=None,
        next_run_at=at(0),
        now=NOW,
    )


def test_materialise_records_occurrences_and_moves_the_next_run(store: Store) -> None:
    schedule(store)
    new = store.materialise(
        None, "sync", planned(0, 1), expected_next_run_at=at(0), next_run_at=at(2), now=NOW
    )
    assert new == 2
    assert store.get_schedule(None, "sync").next_run_at == at(2)
    history = store.history(None, key="sync")
    assert [(o.scheduled_for, o.status, o.attempts) for o in history] == [
        (at(1), "pending", 0),
        (at(0), "pending", 0),
    ]
    assert history[0].local_wall == at(1).replace(tzinfo=None)
    assert store.next_due_at() == at(0)  # the pending occurrence, before the schedule's next run


def test_next_due_after_a_time_counts_only_later_times(store: Store) -> None:
    schedule(store)
    store.materialise(
        None, "sync", planned(0, 1), expected_next_run_at=at(0), next_run_at=at(2), now=NOW
    )
    assert store.next_due_at(after=at(0)) == at(1)  # the later occurrence
    assert store.next_due_at(after=at(1)) == at(2)  # the schedule's next run
    assert store.next_due_at(["sync"], after=at(2)) is None
    assert store.next_due_at() == at(0)


def test_a_stale_expected_next_run_writes_nothing(store: Store) -> None:
    schedule(store)
    store.materialise(
        None, "sync", planned(0), expected_next_run_at=at(0), next_run_at=at(1), now=NOW
    )
    # a second process that read the schedule before the first moved it on, and planned more
    late = store.materialise(
        None, "sync", planned(0, 1, 2), expected_next_run_at=at(0), next_run_at=at(5), now=NOW
    )
    assert late == 0
    assert len(store.history(None)) == 1
    assert store.get_schedule(None, "sync").next_run_at == at(1)


def test_an_occurrence_is_recorded_once_even_when_planned_twice(store: Store) -> None:
    # Lesson 1: one row per (schedule, scheduled time), unique in the database.
    schedule(store)
    store.materialise(
        None, "sync", planned(0), expected_next_run_at=at(0), next_run_at=at(1), now=NOW
    )
    again = store.materialise(
        None, "sync", planned(0, 1), expected_next_run_at=at(1), next_run_at=at(2), now=NOW
    )
    assert again == 1
    assert [o.scheduled_for for o in store.history(None)] == [at(1), at(0)]


def test_concurrent_materialisers_record_each_occurrence_once(store: Store) -> None:
    url = f"sqlite:///{store.path}" if store.dialect == "sqlite" else store.conninfo  # type: ignore[attr-defined]
    schedule(store)
    stores = [open_store(url) for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    counts: list[int] = []

    def race(other: Store) -> None:
        barrier.wait()
        counts.append(
            other.materialise(
                None,
                "sync",
                planned(0, 1, 2),
                expected_next_run_at=at(0),
                next_run_at=at(3),
                now=NOW,
            )
        )

    threads = [threading.Thread(target=race, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(counts) == [0, 0, 0, 3]
    assert len(store.history(None)) == 3


def test_no_next_run_ends_the_schedule(store: Store) -> None:
    schedule(store)
    store.materialise(
        None, "sync", planned(0), expected_next_run_at=at(0), next_run_at=None, now=NOW
    )
    ended = store.get_schedule(None, "sync")
    assert (ended.status, ended.next_run_at) == ("ended", None)
    assert store.next_due_at() == at(0)  # its last occurrence still waits to run


def test_skips_are_recorded_with_their_reason(store: Store) -> None:
    schedule(store)
    skipped = planned(0, status="skipped", reason="misfire: missed by 3 weeks, outside grace")
    store.materialise(None, "sync", skipped, expected_next_run_at=at(0), next_run_at=at(1), now=NOW)
    (only,) = store.history(None, status="skipped")
    assert only.reason == "misfire: missed by 3 weeks, outside grace"
    assert store.history(None, status="pending") == []


def test_next_due_leaves_out_paused_and_removed_schedules(store: Store) -> None:
    schedule(store, "a")
    schedule(store, "b")
    store.materialise(None, "a", [], expected_next_run_at=at(0), next_run_at=at(5), now=NOW)
    assert store.next_due_at() == at(0)  # b
    store.set_paused(None, "b", True, NOW)
    assert store.next_due_at() == at(5)
    store.remove_schedule(None, "a", NOW)
    assert store.next_due_at() is None


def test_history_filters_each_mean_any_when_none(store: Store) -> None:
    schedule(store, "a")
    schedule(store, "b", tenant="acme")
    store.materialise(
        None, "a", planned(0, 1, 2), expected_next_run_at=at(0), next_run_at=at(3), now=NOW
    )
    store.materialise(
        "acme", "b", planned(0), expected_next_run_at=at(0), next_run_at=at(1), now=NOW
    )
    assert len(store.history(None)) == 3
    assert [o.scheduled_for for o in store.history(None, since=at(1))] == [at(2), at(1)]
    assert [o.scheduled_for for o in store.history(None, until=at(1))] == [at(0)]
    assert [o.scheduled_for for o in store.history(None, limit=1)] == [at(2)]
    assert store.history(None, key="b") == []  # another tenant's key is invisible
    (acme,) = store.history("acme")
    assert (acme.key, acme.tenant) == ("b", "acme")
    store.remove_schedule(None, "a", NOW)
    assert len(store.history(None, key="a")) == 3  # history outlives the schedule


def test_dst_details_are_kept_for_audit(store: Store) -> None:
    schedule(store)
    wall = datetime(2026, 10, 25, 2, 30)
    instance = Instance(
        datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
        wall,
        1,
        "Europe/Berlin",
        wall,
        "fold-second",
        ordinal=7,
    )
    store.materialise(
        None, "sync", [Planned(instance)], expected_next_run_at=at(0), next_run_at=at(1), now=NOW
    )
    (kept,) = store.history(None)
    assert (kept.local_wall, kept.fold, kept.dst, kept.ordinal) == (wall, 1, "fold-second", 7)


def test_next_due_counts_only_what_a_claim_of_these_jobs_could_take(store: Store) -> None:
    schedule(store)
    store.materialise(
        None, "sync", planned(0), expected_next_run_at=at(0), next_run_at=at(3), now=NOW
    )
    assert store.next_due_at(["sync"]) == at(0)
    assert store.next_due_at(["report"]) is None  # a worker without the job sleeps on
    store.set_paused(None, "sync", True, NOW)
    assert store.next_due_at(["sync"]) is None  # paused: neither the waiting one nor the next
    assert store.next_due_at() is None


def test_materialise_many_applies_a_batch_in_one_call(store: Store) -> None:
    for key in ("a", "b", "c"):
        schedule(store, key)
    batch = [
        Materialisation(None, key, planned(0), expected_next_run_at=at(0), next_run_at=at(1))
        for key in ("a", "b", "c")
    ]
    stale = Materialisation(None, "a", planned(0), expected_next_run_at=at(5), next_run_at=at(6))
    assert store.materialise_many([*batch, stale], NOW).new == 3
    assert store.materialise_many(batch, NOW).new == 0  # the next runs moved on: nothing twice
    assert [store.get_schedule(None, k).next_run_at for k in ("a", "b", "c")] == [at(1)] * 3


def test_a_schedule_another_transaction_holds_is_skipped_not_waited_for(
    postgres_url: str,
) -> None:
    store = open_store(postgres_url)
    schedule(store, "a")
    schedule(store, "b")
    items = [
        Materialisation(None, k, planned(0), expected_next_run_at=at(0), next_run_at=at(1))
        for k in ("a", "b")
    ]
    with psycopg.connect(postgres_url) as other:
        other.execute("SELECT 1 FROM oncely_schedules WHERE key = 'a' FOR UPDATE")
        started = time.monotonic()
        assert store.materialise_many(items, NOW).new == 1  # only b; a is the other's
        assert time.monotonic() - started < 2.0
    assert store.materialise_many(items, NOW).new == 1  # a, now that it is free
    store.close()
