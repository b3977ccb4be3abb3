"""Metrics: the families and labels /metrics exposes, in a registry per worker."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from oncely.worker.metrics import OUTCOMES, Metrics


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    families = text_string_to_metric_families(metrics.render().decode())
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in families
        for s in family.samples
    }


def test_render_has_every_family_with_its_labels() -> None:
    metrics = Metrics()
    metrics.outcome("digest", "succeeded", 2)
    metrics.outcome("digest", "retrying")
    metrics.lag("digest", 0.002)
    metrics.tick(0.04)
    metrics.tick_failed()
    metrics.reclaimed(3)
    metrics.in_flight_from(lambda: 4)

    text = metrics.render().decode()
    for family, kind in [
        ("oncely_occurrences_total", "counter"),
        ("oncely_lag_seconds", "histogram"),
        ("oncely_tick_duration_seconds", "histogram"),
        ("oncely_tick_failures_total", "counter"),
        ("oncely_leases_reclaimed_total", "counter"),
        ("oncely_in_flight", "gauge"),
    ]:
        assert f"# TYPE {family} {kind}\n" in text
    samples = _samples(metrics)
    assert samples[("oncely_occurrences_total", (("job", "digest"), ("status", "succeeded")))] == 2
    assert samples[("oncely_occurrences_total", (("job", "digest"), ("status", "retrying")))] == 1
    assert samples[("oncely_lag_seconds_bucket", (("job", "digest"), ("le", "0.001")))] == 0
    assert samples[("oncely_lag_seconds_bucket", (("job", "digest"), ("le", "0.0025")))] == 1
    assert samples[("oncely_lag_seconds_bucket", (("job", "digest"), ("le", "300.0")))] == 1
    assert samples[("oncely_tick_duration_seconds_count", ())] == 1
    assert samples[("oncely_tick_failures_total", ())] == 1
    assert samples[("oncely_leases_reclaimed_total", ())] == 3
    assert samples[("oncely_in_flight", ())] == 4
    assert metrics.content_type.startswith("text/plain")


def test_each_worker_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.outcome("digest", "failed")
    assert ("oncely_occurrences_total", (("job", "digest"), ("status", "failed"))) in _samples(
        first
    )
    assert not any(name == "oncely_occurrences_total" for name, _ in _samples(second))


@pytest.mark.parametrize("status", sorted(OUTCOMES))
def test_every_outcome_is_a_status_label(status: str) -> None:
    metrics = Metrics()
    metrics.outcome("job", status)
    assert _samples(metrics)[("oncely_occurrences_total", (("job", "job"), ("status", status)))]


def test_an_unknown_outcome_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown outcome 'succeded'"):
        Metrics().outcome("digest", "succeded")


def test_an_early_start_counts_as_no_lag() -> None:
    metrics = Metrics()
    metrics.lag("digest", -0.5)
    samples = _samples(metrics)
    assert samples[("oncely_lag_seconds_sum", (("job", "digest"),))] == 0
    assert samples[("oncely_lag_seconds_bucket", (("job", "digest"), ("le", "0.001")))] == 1


def test_the_misses_are_counters_by_job_and_reason() -> None:
    metrics = Metrics()
    metrics.skipped("digest", "misfire", 3)
    metrics.skipped("digest", "overlap")
    metrics.paused("digest")
    metrics.invalid("remind", 2)
    text = metrics.render().decode()
    for family in (
        "oncely_occurrences_skipped_total",
        "oncely_schedules_paused_total",
        "oncely_schedules_invalid_total",
    ):
        assert f"# TYPE {family} counter\n" in text
    samples = _samples(metrics)
    skipped = "oncely_occurrences_skipped_total"
    assert samples[(skipped, (("job", "digest"), ("reason", "misfire")))] == 3
    assert samples[(skipped, (("job", "digest"), ("reason", "overlap")))] == 1
    assert samples[("oncely_schedules_paused_total", (("job", "digest"),))] == 1
    assert samples[("oncely_schedules_invalid_total", (("job", "remind"),))] == 2


def test_an_unknown_skip_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown skip reason 'late'"):
        Metrics().skipped("digest", "late")
