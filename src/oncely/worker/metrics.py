"""The worker's Prometheus metrics, in a registry of its own.

Each `Metrics` owns its `CollectorRegistry`, never prometheus_client's global one: several workers
live in one test process (and in one web-server process, with `app.start()`), and a second
registration of a name in the global registry raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

if TYPE_CHECKING:
    from oncely.engine import TickReport
    from oncely.worker.schedule_states import ScheduleStates

OUTCOMES = frozenset(
    {
        "succeeded",
        "retrying",
        "failed",
        "skipped",
        "abandoned",
        "lease_lost",
        "released",
        "unbooked",
        "timed_out",
    }
)
"""The ``status`` label values of ``oncely_occurrences_total``."""

SKIP_CAUSES = frozenset({"misfire", "overlap"})
"""The ``reason`` label values of ``oncely_occurrences_skipped_total``."""

BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
"""Histogram buckets in seconds, from 1 ms to 5 min."""


class Metrics:
    """Counters, histograms and a gauge of what this worker did, rendered for `/metrics`.

    Families: ``oncely_occurrences_total{job,status}`` (outcomes booked by this worker),
    ``oncely_occurrences_skipped_total{job,reason}`` (occurrences this worker recorded as
    skipped, wherever: materialising, claiming or starting), ``oncely_schedules_paused_total{job}``
    and ``oncely_schedules_invalid_total{job}`` (schedules this worker paused by pause_after or
    stopped as invalid), ``oncely_lag_seconds{job}`` (due time to start),
    ``oncely_tick_duration_seconds``, ``oncely_tick_failures_total``,
    ``oncely_leases_reclaimed_total``, ``oncely_in_flight``; and, once `schedules_from` gave it
    a reading, ``oncely_schedules{job,state}`` (read from the store: see `ScheduleStates`).
    Safe to call from several threads (prometheus_client locks each value).
    """

    content_type: str = CONTENT_TYPE_LATEST
    """The Content-Type of `render()`'s bytes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._occurrences = Counter(
            "oncely_occurrences_total",
            "Occurrence outcomes booked by this worker.",
            ("job", "status"),
            registry=self.registry,
        )
        self._skipped = Counter(
            "oncely_occurrences_skipped_total",
            "Occurrences this worker recorded as skipped, by reason: misfire or overlap.",
            ("job", "reason"),
            registry=self.registry,
        )
        self._paused = Counter(
            "oncely_schedules_paused_total",
            "Schedules this worker paused after pause_after consecutive failed occurrences.",
            ("job",),
            registry=self.registry,
        )
        self._invalid = Counter(
            "oncely_schedules_invalid_total",
            "Schedules this worker stopped as invalid: their stored trigger no longer reads.",
            ("job",),
            registry=self.registry,
        )
        self._lag = Histogram(
            "oncely_lag_seconds",
            "Seconds from an occurrence's due time to the start of its attempt.",
            ("job",),
            buckets=BUCKETS_S,
            registry=self.registry,
        )
        self._tick = Histogram(
            "oncely_tick_duration_seconds",
            "Seconds a tick of this worker took.",
            buckets=BUCKETS_S,
            registry=self.registry,
        )
        self._tick_failures = Counter(
            "oncely_tick_failures_total",
            "Ticks of this worker that failed.",
            registry=self.registry,
        )
        self._reclaimed = Counter(
            "oncely_leases_reclaimed_total",
            "Expired leases this worker reclaimed.",
            registry=self.registry,
        )
        self._in_flight = Gauge(
            "oncely_in_flight",
            "Attempts running on this worker now.",
            registry=self.registry,
        )

    def outcome(self, job: str, status: str, n: int = 1) -> None:
        """Count ``n`` occurrences of ``job`` booked with ``status`` (one of `OUTCOMES`).

        Raises ValueError for another status: a typo would otherwise start a series no dashboard
        looks at.
        """
        if status not in OUTCOMES:
            raise ValueError(f"unknown outcome {status!r}; expected one of {sorted(OUTCOMES)}")
        self._occurrences.labels(job=job, status=status).inc(n)

    def skipped(self, job: str, reason: str, n: int = 1) -> None:
        """Count ``n`` occurrences of ``job`` recorded as skipped for ``reason`` (one of
        `SKIP_CAUSES`); raises ValueError for another reason, as `outcome` does."""
        if reason not in SKIP_CAUSES:
            raise ValueError(
                f"unknown skip reason {reason!r}; expected one of {sorted(SKIP_CAUSES)}"
            )
        self._skipped.labels(job=job, reason=reason).inc(n)

    def paused(self, job: str, n: int = 1) -> None:
        """Count ``n`` schedules of ``job`` paused by pause_after."""
        self._paused.labels(job=job).inc(n)

    def invalid(self, job: str, n: int = 1) -> None:
        """Count ``n`` schedules of ``job`` stopped as invalid."""
        self._invalid.labels(job=job).inc(n)

    def missed(self, report: TickReport) -> None:
        """Count the skips, pauses and invalid schedules of ``report``."""
        for (job, reason), n in report.skipped.items():
            self.skipped(job, reason, n)
        for job, n in report.paused_by_job.items():
            self.paused(job, n)
        for job, n in report.invalid_by_job.items():
            self.invalid(job, n)

    def schedules_from(self, states: ScheduleStates) -> None:
        """Serve ``oncely_schedules{job,state}`` from ``states``, read when scraped."""
        self.registry.register(states)

    def lag(self, job: str, seconds: float) -> None:
        """Observe the lag of one attempt of ``job``; a negative lag (early start) counts as 0."""
        # A negative observation would lower the histogram's sum, and average lag with it.
        self._lag.labels(job=job).observe(max(0.0, seconds))

    def tick(self, seconds: float) -> None:
        """Observe the duration of one tick."""
        self._tick.observe(seconds)

    def tick_failed(self) -> None:
        """Count one failed tick."""
        self._tick_failures.inc()

    def reclaimed(self, n: int) -> None:
        """Count ``n`` expired leases reclaimed."""
        self._reclaimed.inc(n)

    def in_flight_from(self, count: Callable[[], int]) -> None:
        """Read the number of attempts running now from ``count``, when scraped."""
        # Read at scrape time: set by each handler, it took the gauge's lock twice per occurrence.
        self._in_flight.set_function(count)

    def render(self) -> bytes:
        """Every family in the text exposition format (of `content_type`)."""
        return generate_latest(self.registry)
