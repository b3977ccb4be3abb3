"""oncely_schedules: read from a real store when scraped, at most every MAX_AGE_S, and served
from the last reading (saying how old it is) when the store is down, never failing or hanging
the scrape."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from _worker_support import FakeClock
from prometheus_client.parser import text_string_to_metric_families

from _proxy import proxied
from oncely import every
from oncely.store import Store, open_store
from oncely.worker.metrics import Metrics
from oncely.worker.schedule_states import MAX_AGE_S, WAIT_S, ScheduleStates

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _save(store: Store, key: str, job: str = "remind") -> None:
    store.save_schedule(tenant=None, key=key, job=job, origin="api", trigger=every(hours=1),
                        payload=None, next_run_at=NOW, now=NOW)  # fmt: skip


def _scrape(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
    }


def _states(metrics: Metrics) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        labels: v for (name, labels), v in _scrape(metrics).items() if name == "oncely_schedules"
    }


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    store = open_store(sqlite_url)
    store.migrate(NOW)
    yield store
    store.close()


def test_a_reading_is_served_until_it_is_max_age_old(sqlite_store: Store) -> None:
    clock = FakeClock()
    metrics = Metrics()
    metrics.schedules_from(ScheduleStates(sqlite_store.schedule_states, clock=clock))
    _save(sqlite_store, "a")
    sqlite_store.set_paused(None, "a", True, NOW)
    assert _states(metrics) == {(("job", "remind"), ("state", "paused")): 1}
    _save(sqlite_store, "b")
    sqlite_store.set_paused(None, "b", True, NOW)
    clock.advance(MAX_AGE_S - 1)
    assert _states(metrics) == {(("job", "remind"), ("state", "paused")): 1}  # not read again
    assert _scrape(metrics)[("oncely_schedules_read_age_seconds", ())] == MAX_AGE_S - 1
    clock.advance(1)
    assert _states(metrics) == {(("job", "remind"), ("state", "paused")): 2}
    sqlite_store.set_paused(None, "a", False, NOW)
    sqlite_store.set_paused(None, "b", False, NOW)
    clock.advance(MAX_AGE_S)
    assert _states(metrics) == {}  # resumed: the series is gone, and an alert on it resolves


def test_nothing_is_served_before_there_is_a_store_to_read() -> None:
    metrics = Metrics()
    metrics.schedules_from(ScheduleStates(lambda: None))
    assert not any(name.startswith("oncely_schedules") for name, _ in _scrape(metrics))


def test_a_store_that_is_down_serves_the_last_reading_with_its_age_and_says_so_once(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with proxied(postgres_url) as (proxy, through):
        store = open_store(through)
        clock = FakeClock()
        metrics = Metrics()
        metrics.schedules_from(ScheduleStates(store.schedule_states, clock=clock))
        try:
            _save(store, "a")
            store.set_paused(None, "a", True, NOW)
            assert _states(metrics) == {(("job", "remind"), ("state", "paused")): 1}
            proxy.cut()
            with caplog.at_level(logging.INFO, logger="oncely"):
                for _ in range(3):
                    clock.advance(MAX_AGE_S)
                    started = time.monotonic()
                    samples = _scrape(metrics)
                    assert time.monotonic() - started < WAIT_S + 1  # never the store's 5 s timeout
                    assert (
                        samples[("oncely_schedules", (("job", "remind"), ("state", "paused")))] == 1
                    )
                    time.sleep(WAIT_S)  # the failed read is over before the next scrape
                assert samples[("oncely_schedules_read_age_seconds", ())] >= 3 * MAX_AGE_S
                warnings = [r for r in caplog.records if "could not read" in r.getMessage()]
                assert len(warnings) == 1
                assert warnings[0].levelno == logging.WARNING
                proxy.restore()
                clock.advance(MAX_AGE_S)
                assert _scrape(metrics)[("oncely_schedules_read_age_seconds", ())] == 0
            assert any("reads the schedules' states" in r.getMessage() for r in caplog.records)
        finally:
            store.close()
