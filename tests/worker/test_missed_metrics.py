"""Misses in /metrics, scraped as Prometheus does: occurrences skipped (misfire, overlap) wherever
they are written, schedules paused by pause_after or stopped as invalid, and the schedules still
waiting for a person, read from the store. Workers on a test clock, so that time moves only when
the test says so; every count is compared with what history recorded."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from _serving import eventually, serving
from prometheus_client.parser import text_string_to_metric_families

import oncely
from oncely.engine import TickReport
from oncely.testing import Clock
from oncely.worker import Worker

START = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
def make_app(url: str, clock: Clock) -> Iterator[type[oncely.App]]:
    apps: list[oncely.App] = []

    def make() -> oncely.App:
        app = oncely.App(url, clock=clock)
        apps.append(app)
        return app

    yield make  # type: ignore[misc]
    for app in apps:
        app.close()


def scrape(worker: Worker) -> Samples:
    eventually(lambda: worker.http_address is not None, what="the worker to listen")
    with urllib.request.urlopen(f"http://{worker.http_address}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(worker: Worker, name: str, **labels: str) -> float:
    return scrape(worker).get((name, tuple(sorted(labels.items()))), 0.0)


def skipped(app: oncely.App, cause: str, key: str | None = None) -> int:
    return sum(
        o.status == "skipped" and (o.reason or "").startswith(f"{cause}:")
        for o in app.history(key=key, limit=10_000)
    )


def counted(worker: Worker, job: str, reason: str) -> float:
    return sample(worker, "oncely_occurrences_skipped_total", job=job, reason=reason)


def served(app: oncely.App, **options: object) -> Iterator[Worker]:
    return serving(app, http="127.0.0.1:0", wake_cap=0.1, **options)  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("down", "ran"),
    [(timedelta(days=2), 0), (timedelta(days=2, minutes=30), 1)],
    ids=["beyond-grace", "superseded-by-the-newest"],
)
def test_misfire_skips_written_when_materialising_are_counted(
    make_app: type[oncely.App], clock: Clock, down: timedelta, ran: int
) -> None:
    app = make_app()
    runs: list[datetime] = []

    @app.job(oncely.every(hours=1))
    def hourly(run: oncely.Run) -> None:
        runs.append(run.scheduled_for)

    app.tick()  # 08:30: reconciled, next run 09:00
    clock.advance(down)
    with served(app) as worker:
        eventually(lambda: skipped(app, "misfire") > 40, what="the missed occurrences")
        eventually(lambda: counted(worker, "hourly", "misfire") == skipped(app, "misfire"))
        eventually(lambda: len(runs) == ran)
        assert counted(worker, "hourly", "overlap") == 0
        # Recorded skipped, never booked: not an outcome of this worker's.
        assert sample(worker, "oncely_occurrences_total", job="hourly", status="skipped") == 0


def test_a_misfire_skip_written_when_starting_is_counted(
    make_app: type[oncely.App], clock: Clock
) -> None:
    app = make_app()

    @app.job(oncely.every(hours=1))
    def hourly(run: oncely.Run) -> None:
        raise AssertionError("claimed a day late: never run")

    app.tick()
    clock.set(START.replace(minute=0) + timedelta(hours=1))
    app._the_engine().prepare(TickReport())  # 09:00 written in time, then every worker went down
    clock.advance(days=1, minutes=30)  # and every occurrence since is beyond grace too
    with served(app) as worker:
        eventually(lambda: _claimed_late(app), what="the 09:00 row to be claimed and skipped")
        (late,) = _claimed_late(app)
        assert skipped(app, "misfire") >= 24
        assert late.scheduled_for == START.replace(minute=0) + timedelta(hours=1)
        eventually(lambda: counted(worker, "hourly", "misfire") == skipped(app, "misfire"))
        assert sample(worker, "oncely_occurrences_total", job="hourly", status="skipped") == 1


def _first_run_holds(app: oncely.App) -> tuple[threading.Event, threading.Event]:
    """A minutely job with overlap='skip' whose 09:00 run holds until the second event."""
    started, release = threading.Event(), threading.Event()

    @app.job(oncely.every(minutes=1), overlap="skip")
    def sync(run: oncely.Run) -> None:
        if run.scheduled_for.minute == 0:
            started.set()
            release.wait(30)

    return started, release


def test_overlap_skips_written_when_materialising_are_counted(
    make_app: type[oncely.App], clock: Clock
) -> None:
    app = make_app()
    started, release = _first_run_holds(app)
    clock.set(START.replace(minute=59, second=30))
    app.tick()  # reconciled, next run 09:00
    clock.set(START.replace(hour=9, minute=0))
    with served(app) as worker:
        try:
            assert started.wait(10)
            for minute in (1, 2):
                clock.set(START.replace(hour=9, minute=minute))
                eventually(lambda m=minute: skipped(app, "overlap") == m, what=f"09:0{minute}")
            eventually(lambda: counted(worker, "sync", "overlap") == 2)
        finally:
            release.set()
        assert counted(worker, "sync", "misfire") == 0


def test_an_overlap_skip_written_when_claiming_is_counted(
    make_app: type[oncely.App], clock: Clock
) -> None:
    app, other = make_app(), make_app()
    started, release = _first_run_holds(app)
    _first_run_holds(other)
    clock.set(START.replace(minute=59, second=30))
    app.tick()
    clock.set(START.replace(hour=9, minute=0))
    with served(app) as worker:
        try:
            assert started.wait(10)
            # Another worker writes 09:01 half a second ahead of its time; at its time 09:00
            # still runs, and only the claim can see that.
            clock.set(START.replace(hour=9, minute=0, second=59, microsecond=500_000))
            other._the_engine().prepare(TickReport(), ahead_to=START.replace(hour=9, minute=1))
            assert [o.status for o in app.history(key="sync")] == ["pending", "running"]
            clock.set(START.replace(hour=9, minute=1, microsecond=500_000))
            eventually(lambda: skipped(app, "overlap") == 1, what="09:01 skipped")
            eventually(lambda: counted(worker, "sync", "overlap") == 1)
        finally:
            release.set()


def test_a_pause_by_pause_after_is_counted_and_stays_in_the_gauge(
    make_app: type[oncely.App], clock: Clock
) -> None:
    app = make_app()

    @app.job(oncely.every(minutes=1), retries=1, pause_after=2)
    def flaky(run: oncely.Run) -> None:
        raise RuntimeError("the partner API is down")

    clock.set(START.replace(minute=59, second=30))
    app.tick()
    clock.set(START.replace(hour=9, minute=0))
    with served(app) as worker:
        eventually(lambda: len(app.history(status="failed")) == 1, what="09:00 to fail")
        clock.set(START.replace(hour=9, minute=1))
        eventually(lambda: app.schedules()[0].paused, what="the pause")
        clock.set(START.replace(hour=9, minute=2))  # paused: nothing more fails
        eventually(lambda: sample(worker, "oncely_schedules_paused_total", job="flaky") == 1)
        samples = scrape(worker)
        assert samples[("oncely_schedules", (("job", "flaky"), ("state", "paused_failing")))] == 1
        assert len(app.history(status="failed")) == 2


def test_an_invalid_stored_trigger_is_counted_and_stays_in_the_gauge(
    make_app: type[oncely.App], clock: Clock
) -> None:
    app = make_app()

    @app.job()
    def remind(run: oncely.Run) -> None: ...

    for key in ("bad", "good"):
        app.schedule(remind, oncely.every(minutes=1), key=key)
    _damage(app, "bad", '{"kind": "cron", "v": 1, "expr": "61 * * * *", "tz": "UTC"}')
    clock.advance(minutes=1)
    with served(app) as worker:
        # Not the schedule's listed status: a trigger that does not read is listed invalid at
        # once. The occurrence is written with the stop, before any scrape reads the gauge.
        eventually(lambda: [o.status for o in app.history(key="bad")] == ["invalid"])
        eventually(lambda: sample(worker, "oncely_schedules_invalid_total", job="remind") == 1)
        samples = scrape(worker)
        assert samples[("oncely_schedules", (("job", "remind"), ("state", "invalid")))] == 1
        assert ("oncely_schedules", (("job", "remind"), ("state", "paused"))) not in samples


def test_the_gauge_reads_the_schedules_waiting_for_a_person(
    make_app: type[oncely.App], clock: Clock
) -> None:
    app = make_app()

    @app.job()
    def remind(run: oncely.Run) -> None: ...

    @app.job()
    def report(run: oncely.Run) -> None: ...

    for key in ("a", "b", "c"):
        app.schedule(remind, oncely.every(hours=1), key=key)
    app.schedule(report, oncely.every(hours=1), key="r")
    app.pause("a")
    app.pause("b", until=clock() + timedelta(days=1))
    app.pause("r")
    app.schedule(remind, oncely.every(hours=1), key="gone")
    app.pause("gone")
    app.unschedule("gone")
    with served(app) as worker:
        eventually(lambda: ("oncely_schedules_read_age_seconds", ()) in scrape(worker))
        states = {
            labels: value for (name, labels), value in scrape(worker).items()
            if name == "oncely_schedules"
        }  # fmt: skip
        assert states == {
            (("job", "remind"), ("state", "paused")): 2,
            (("job", "report"), ("state", "paused")): 1,
        }


def test_two_workers_racing_count_each_skip_they_wrote_once(
    make_app: type[oncely.App], clock: Clock
) -> None:
    apps = [make_app(), make_app()]
    ran: list[str] = []
    for app in apps:

        @app.job(misfire_limit=20)
        def minutely(run: oncely.Run) -> None:
            ran.append(run.key)

    apps[0].schedule_many(
        "minutely", [{"trigger": oncely.every(minutes=1), "key": f"user{n}"} for n in range(300)]
    )
    clock.advance(minutes=30, seconds=30)  # 19 missed of the newest 20 superseded, each
    with _together(*apps) as (first, second):
        eventually(lambda: len(ran) == 300, timeout=60, what="the newest of each to run")
        history = skipped(apps[0], "misfire")
        assert history == 300 * 19

        def total() -> float:
            return counted(first, "minutely", "misfire") + counted(second, "minutely", "misfire")

        eventually(lambda: total() >= history, what="both workers' counts")
        time.sleep(0.5)  # a count over history would have come by now
        assert total() == history


@contextmanager
def _together(*apps: oncely.App) -> Iterator[list[Worker]]:
    """Workers of ``apps`` started at once, so that their first materialise races."""
    workers = [Worker(app, http="127.0.0.1:0", wake_cap=0.1) for app in apps]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    try:
        yield workers
    finally:
        for worker, thread in zip(workers, threads, strict=True):
            worker.stop()
            thread.join(timeout=60)
            assert not thread.is_alive(), "a worker did not stop within 60 s"


def _claimed_late(app: oncely.App) -> list[oncely.Occurrence]:
    return [o for o in app.history(limit=1000) if "claimed" in (o.reason or "")]


def _damage(app: oncely.App, key: str, spec: str) -> None:
    """Overwrite schedule ``key``'s stored trigger with ``spec``, as tests/engine does."""
    marker = "?" if app.store.dialect == "sqlite" else "%s"
    cast = "" if app.store.dialect == "sqlite" else "::jsonb"
    with app.store.transaction() as connection:
        connection.execute(
            f"UPDATE oncely_schedules SET trigger_spec = {marker}{cast} WHERE key = {marker}",
            (spec, key),
        )
