"""A booked retry wakes the workers: without a notice, a 10 s retry waited out a 30 s wake cap."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from oncely import at
from oncely.model import Planned
from oncely.store import PostgresStore

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.postgres
def test_a_booked_retry_wakes_a_watching_worker(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    woken = threading.Event()
    instance = at(NOW).next_instance_after(NOW - timedelta(microseconds=1))
    assert instance is not None
    store.save_schedule(
        tenant=None, key="k", job="sync", origin="api", trigger=at(NOW), payload=None,
        next_run_at=None, now=NOW, occurrences=[Planned(instance, origin="defer")],
    )  # fmt: skip
    (claim,) = store.claim_due(
        owner="host#1", lease=timedelta(minutes=5), limit=1, now=NOW, jobs=["sync"],
        reclaim=[], serial=[],
    )  # fmt: skip
    watch = store.watch(woken.set)
    assert watch is not None
    try:
        failure = store.book_failure(
            claim, NOW, error="boom", retry_at=NOW + timedelta(seconds=10), pause_after=None
        )
        assert failure.booked
        assert woken.wait(5.0), "no notice followed the booked retry"
    finally:
        watch.close()
        store.close()
