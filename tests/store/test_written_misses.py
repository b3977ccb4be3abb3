"""Store contract, misses: each skip, pause and invalid stop is returned by the call that wrote
it, and by no other (the per-process counters of /metrics add these up across processes)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from test_occurrences import NOW, TRIGGER, at, planned, schedule

from oncely.model import Materialisation, Planned, Skipped
from oncely.store import Store, open_store

MISFIRE = "misfire: 2h late, beyond grace 15m (misfire='skip')"


def _url(store: Store) -> str:
    return f"sqlite:///{store.path}" if store.dialect == "sqlite" else store.conninfo  # type: ignore[attr-defined]


def _late(*hours: int) -> list[Planned]:
    return planned(*hours, status="skipped", reason=MISFIRE)


def test_racing_materialisers_return_the_skips_only_from_the_one_that_wrote_them(
    store: Store,
) -> None:
    schedule(store)
    stores = [open_store(_url(store)) for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    returned: list[list[Skipped]] = []
    item = Materialisation(None, "sync", [*_late(0, 1), *planned(2)], at(0), at(3))

    def race(other: Store) -> None:
        barrier.wait()
        returned.append(list(other.materialise_many([item], NOW).skipped))

    threads = [threading.Thread(target=race, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for other in stores:
        other.close()
    assert sorted(len(skips) for skips in returned) == [0, 0, 0, 2]
    assert [s for skips in returned for s in skips] == [Skipped("sync", "misfire")] * 2
    assert sum(o.status == "skipped" for o in store.history(None)) == 2


def test_a_skip_planned_over_an_occurrence_already_recorded_is_not_returned(store: Store) -> None:
    schedule(store)
    store.add_occurrences(None, "sync", planned(1), now=NOW)  # a trigger, written first
    item = Materialisation(None, "sync", _late(0, 1, 2), at(0), at(3))
    written = store.materialise_many([item], NOW)
    assert written.new == 2
    assert written.skipped == [Skipped("sync", "misfire")] * 2
    statuses = {o.scheduled_for: o.status for o in store.history(None)}
    assert statuses == {at(0): "skipped", at(1): "pending", at(2): "skipped"}


def test_overlap_and_superseded_skips_say_their_cause(store: Store) -> None:
    schedule(store)
    store.materialise(None, "sync", planned(0), expected_next_run_at=at(0), next_run_at=at(1),
                      now=NOW)  # fmt: skip
    stale = Materialisation(
        None, "sync", planned(1, 2), at(1), at(3), stale_before=at(2),
        stale_reason="misfire: superseded by the newer occurrence (misfire='skip')",
    )  # fmt: skip
    written = store.materialise_many([stale], NOW + 2 * timedelta(hours=1))
    assert written.skipped == [Skipped("sync", "misfire")]  # 00:00, pending, superseded
    (claim,) = store.claim_due(owner="w#1", lease=timedelta(minutes=5), limit=5,
                               now=at(1), jobs=["sync"], reclaim=[], serial=["sync"])  # fmt: skip
    overlapped = Materialisation(None, "sync", planned(3), at(3), at(4), overlap="skip")
    written = store.materialise_many([overlapped], at(3))
    assert written.skipped == [Skipped("sync", "overlap")]
    assert claim.scheduled_for == at(1)


def test_a_claim_returns_the_overlap_skips_it_wrote(store: Store) -> None:
    schedule(store)
    # 01:00 written ahead of its time at 00:00; at 01:00 the 00:00 one still runs.
    store.materialise(None, "sync", planned(0, 1), expected_next_run_at=at(0), next_run_at=at(2),
                      now=NOW)  # fmt: skip
    options = {"owner": "w#1", "lease": timedelta(hours=5), "limit": 5, "jobs": ["sync"],
               "reclaim": [], "serial": ["sync"], "skip": ["sync"]}  # fmt: skip
    (running,) = store.claim_due(now=at(0), **options)  # type: ignore[arg-type]
    claimed = store.claim_due(now=at(1), **options)  # type: ignore[arg-type]
    assert list(claimed) == []
    assert claimed.skipped == [Skipped("sync", "overlap")]
    again = store.claim_due(now=at(1), **options)  # type: ignore[arg-type]
    assert again.skipped == []  # skipped already: by the claim before
    assert running.scheduled_for == at(0)


def test_a_failure_pauses_its_schedule_once_and_says_so_once(store: Store) -> None:
    schedule(store)
    store.materialise(None, "sync", planned(0, 1, 2), expected_next_run_at=at(0),
                      next_run_at=at(3), now=NOW)  # fmt: skip
    options = {"owner": "w#1", "lease": timedelta(hours=5), "limit": 5, "jobs": ["sync"],
               "reclaim": [], "serial": []}  # fmt: skip
    claims = store.claim_due(now=at(2), **options)  # type: ignore[arg-type]
    failures = [
        store.book_failure(claim, at(2), error="boom", retry_at=None, pause_after=2)
        for claim in claims
    ]
    assert [(f.consecutive_failures, f.paused, f.paused_now) for f in failures] == [
        (1, False, False),
        (2, True, True),
        (3, True, False),  # paused already: not paused again
    ]


def test_a_schedule_paused_by_hand_is_not_paused_by_its_failures(store: Store) -> None:
    schedule(store)
    store.materialise(None, "sync", planned(0), expected_next_run_at=at(0), next_run_at=at(1),
                      now=NOW)  # fmt: skip
    (claim,) = store.claim_due(owner="w#1", lease=timedelta(hours=5), limit=5, now=at(0),
                               jobs=["sync"], reclaim=[], serial=[])  # fmt: skip
    store.set_paused(None, "sync", True, at(0))
    failure = store.book_failure(claim, at(0), error="boom", retry_at=None, pause_after=1)
    assert (failure.paused, failure.paused_now) == (True, False)


def test_schedule_states_count_the_schedules_waiting_for_a_person(store: Store) -> None:
    for key in ("a", "b", "c", "d", "e"):
        schedule(store, key)
    store.set_paused(None, "a", True, NOW)
    store.set_paused(None, "b", True, NOW)
    store.mark_invalid([(None, "c", "invalid: bad rule")], NOW)
    store.materialise(None, "d", planned(0), expected_next_run_at=at(0), next_run_at=at(1),
                      now=NOW)  # fmt: skip
    (claim,) = store.claim_due(owner="w#1", lease=timedelta(hours=5), limit=5, now=at(0),
                               jobs=["sync"], reclaim=[], serial=[])  # fmt: skip
    store.book_failure(claim, at(0), error="boom", retry_at=None, pause_after=1)
    store.set_paused(None, "e", True, NOW)
    store.remove_schedule(None, "e", NOW)  # removed: waits for no one
    assert store.schedule_states() == {
        ("sync", "paused"): 2,
        ("sync", "invalid"): 1,
        ("sync", "paused_failing"): 1,
    }


def _save(store: Store, key: str, hours: int = 0) -> None:
    store.save_schedule(tenant=None, key=key, job=key, origin="code", trigger=TRIGGER,
                        payload=None, next_run_at=at(hours), now=NOW)  # fmt: skip


def _late_batch(*keys: str) -> list[Materialisation]:
    reason = "misfire: superseded by the newer occurrence (misfire='skip')"
    return [
        Materialisation(
            None,
            key,
            planned(1),
            at(1),
            at(2),
            overlap="skip",
            stale_before=at(1),
            stale_reason=reason,
        )
        for key in keys
    ]


def test_a_late_batch_supersedes_and_counts_each_schedule_on_its_own(store: Store) -> None:
    _save(store, "ran")
    _save(store, "waited")
    _save(store, "new", 1)
    store.materialise(None, "ran", planned(0), expected_next_run_at=at(0), next_run_at=at(1),
                      now=NOW)  # fmt: skip
    (running,) = store.claim_due(owner="w#1", lease=timedelta(hours=5), limit=5, now=at(0),
                                 jobs=["ran"], reclaim=[], serial=["ran"])  # fmt: skip
    store.materialise(None, "waited", planned(0), expected_next_run_at=at(0), next_run_at=at(1),
                      now=NOW)  # fmt: skip
    written = store.materialise_many(_late_batch("ran", "waited", "new"), at(1))
    # "waited"'s 00:00 never started: superseded. "ran"'s still runs: kept, and its 01:00 is
    # skipped as an overlap. "new" had nothing before.
    assert sorted(written.skipped, key=repr) == [
        Skipped("ran", "overlap"), Skipped("waited", "misfire"),
    ]  # fmt: skip
    assert written.new == 3
    statuses = {(o.key, o.scheduled_for): o.status for o in store.history(None)}
    assert statuses == {
        ("ran", at(0)): "running", ("ran", at(1)): "skipped",
        ("waited", at(0)): "skipped", ("waited", at(1)): "pending",
        ("new", at(1)): "pending",
    }  # fmt: skip
    assert running.key == "ran"


def test_postgres_runs_a_late_batchs_supersede_and_count_once_for_all_its_schedules(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run once per schedule, each set up the update of every day's partition: 1,000 schedules
    # materialised a little late took a worker the next second, which made it later still.
    if store.dialect != "postgres":
        pytest.skip("SQLite runs them per schedule, in its one write transaction")
    keys = [f"s{n}" for n in range(50)]
    for key in keys:
        _save(store, key)
        store.materialise(None, key, planned(0), expected_next_run_at=at(0), next_run_at=at(1),
                          now=NOW)  # fmt: skip
    batched = {store._sql[name]: name for name in ("supersede_stale", "in_progress")}  # type: ignore[attr-defined]
    sent: list[tuple[str, int]] = []
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def counted_execute(cursor: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if query in batched:
            sent.append((batched[query], 1))
        return execute(cursor, query, params, **kwargs)

    def counted_executemany(cursor: Any, query: Any, params: Any, **kwargs: Any) -> Any:
        params = list(params)
        if query in batched:
            sent.append((batched[query], len(params)))
        return executemany(cursor, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
    monkeypatch.setattr(psycopg.Cursor, "executemany", counted_executemany)
    written = store.materialise_many(_late_batch(*keys), at(1))
    assert sorted(written.skipped, key=repr) == sorted(
        (Skipped(k, "misfire") for k in keys), key=repr
    )
    assert sorted(sent) == [("in_progress", 1), ("supersede_stale", 1)]
