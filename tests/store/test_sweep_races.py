"""Store contract, a sweep racing the worker it sweeps: a heartbeat that lands between the sweep's
read of expired leases and its change keeps the attempt alive, and the sweep reports only what it
changed.

The heartbeat is sent from another thread right after the sweep's read. On SQLite that read
holds no lock, so the heartbeat lands first and the sweep must see it; on PostgreSQL the read
holds the rows (FOR UPDATE), so the heartbeat waits for the sweep and finds its lease lost.
Either way the two agree.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from oncely import at
from oncely.model import Claim, Planned
from oncely.store import Store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
EXPIRED = NOW + LEASE
LATER = EXPIRED + timedelta(hours=1)
TICK = timedelta(microseconds=1)

Sweep = Callable[[Store], list[Any]]

SWEEPS: dict[str, tuple[str, Sweep, str]] = {
    "abandon_expired": (
        "expired_of_jobs",
        lambda store: store.abandon_expired(now=LATER, jobs=["sync"], reason="lost"),
        "abandoned",
    ),
    "reclaim_expired": (
        "reclaimable",
        lambda store: store.reclaim_expired(LATER, {"sync": 3}),
        "retrying",
    ),
    "fail_orphaned": (
        "orphaned",
        lambda store: store.fail_orphaned(LATER, ["another-job"], EXPIRED),
        "failed",
    ),
}


def running(store: Store) -> Claim:
    instance = at(NOW).next_instance_after(NOW - TICK)
    assert instance is not None
    store.save_schedule(
        tenant=None,
        key="k",
        job="sync",
        origin="api",
        trigger=at(NOW),
        payload=None,
        next_run_at=None,
        now=NOW,
        occurrences=[Planned(instance, origin="defer")],
    )
    (claimed,) = store.claim_due(
        owner="host#1", lease=LEASE, limit=1, now=NOW, jobs=["sync"], reclaim=[], serial=[]
    )
    return claimed


def heartbeat_after_read(
    store: Store, monkeypatch: pytest.MonkeyPatch, read: str, claimed: Claim
) -> tuple[threading.Thread, list[set[int]]]:
    """Send ``claimed``'s heartbeat from another thread once the sweep has run query ``read``,
    and give it a second to land before the sweep goes on."""
    rows = store._rows  # type: ignore[attr-defined]
    extended: list[set[int]] = []
    beat = threading.Thread(
        target=lambda: extended.append(store.extend_leases([(claimed, LATER + LEASE)]))
    )

    def read_then_beat(connection: Any, name: str, params: Mapping[str, Any]) -> Any:
        found = rows(connection, name, params)
        if name == read and not beat.is_alive() and not extended:
            beat.start()
            beat.join(timeout=1)
        return found

    monkeypatch.setattr(store, "_rows", read_then_beat)
    return beat, extended


@pytest.mark.parametrize("sweep", sorted(SWEEPS))
def test_a_heartbeat_between_a_sweeps_read_and_its_change_wins_or_finds_its_lease_lost(
    store: Store, monkeypatch: pytest.MonkeyPatch, sweep: str
) -> None:
    read, run, swept_status = SWEEPS[sweep]
    claimed = running(store)
    beat, extended = heartbeat_after_read(store, monkeypatch, read, claimed)
    swept = run(store)
    beat.join()
    monkeypatch.undo()
    (row,) = store.history(None)
    if extended == [{claimed.occurrence_id}]:  # the heartbeat landed first
        assert swept == []
        assert (row.status, row.lease_expires_at) == ("running", LATER + LEASE)
        assert store.book_success([claimed], LATER) == [claimed]
    else:  # the sweep changed the row first: the heartbeat learns its lease is lost
        assert extended == [set()]
        assert len(swept) == 1
        assert row.status == swept_status
