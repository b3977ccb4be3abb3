"""The workers' own rows: a heartbeat makes or refreshes one, stopping or silence deletes it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from oncely.model import WorkerBeat
from oncely.store import Store

T0 = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)


def beat(name: str, at: datetime, *, started: datetime = T0, code: str = "f1") -> WorkerBeat:
    return WorkerBeat(name, started, at, "1.2.3", code)


def test_a_heartbeat_makes_the_row_then_moves_it_on_never_back(store: Store) -> None:
    store.beat(beat("web-1#10", T0))
    store.beat(beat("web-1#10", T0 + timedelta(minutes=1), started=T0 + timedelta(hours=1)))
    store.beat(beat("web-1#10", T0 + timedelta(seconds=30), code="f2"))  # a clock stepped back
    assert store.workers() == [WorkerBeat("web-1#10", T0, T0 + timedelta(minutes=1), "1.2.3", "f2")]


def test_workers_are_listed_latest_heartbeat_first(store: Store) -> None:
    for n in range(3):
        store.beat(beat(f"w#{n}", T0 + timedelta(seconds=n)))
    assert [w.name for w in store.workers()] == ["w#2", "w#1", "w#0"]
    assert [w.name for w in store.workers(limit=1)] == ["w#2"]


def test_a_stopped_worker_is_forgotten_and_so_are_silent_ones(store: Store) -> None:
    store.beat(beat("stopped#1", T0))
    store.beat(beat("killed#2", T0 - timedelta(hours=2)))
    store.beat(beat("live#3", T0))
    store.forget_worker("stopped#1")
    store.forget_worker("never-was#4")
    assert store.forget_silent_workers(T0 - timedelta(hours=1)) == 1
    assert [w.name for w in store.workers()] == ["live#3"]
