"""The worker loop on a real store: wake-ups, concurrency, heartbeats, lease loss, housekeeping."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from _serving import eventually, serving

import oncely
from oncely.errors import ConfigurationError
from oncely.worker import Worker


def _now() -> datetime:
    return datetime.now(UTC)


def _status(app: oncely.App, key: str) -> str | None:
    found = app.history(key=key, limit=1)
    return found[0].status if found else None


def test_a_deferred_occurrence_runs_when_it_comes_due(url: str) -> None:
    app = oncely.App(url)
    ran: list[datetime] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(_now())

    due = _now() + timedelta(seconds=1)
    app.defer(remind, at=due, key="r1")
    with serving(app):
        eventually(lambda: _status(app, "r1") == "succeeded", what="r1 to succeed")
    assert len(ran) == 1
    assert ran[0] >= due
    app.close()


def test_concurrency_bounds_handlers_running_at_once(url: str) -> None:
    app = oncely.App(url)
    lock = threading.Lock()
    running, most = 0, 0

    @app.job(overlap="allow")
    def work(run: oncely.Run) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.2)
        with lock:
            running -= 1

    for n in range(9):
        app.defer(work, at=_now(), key=f"w{n}")
    with serving(app, concurrency=3):
        eventually(
            lambda: all(_status(app, f"w{n}") == "succeeded" for n in range(9)),
            what="nine handlers",
        )
    assert most == 3
    app.close()


def test_async_handlers_share_one_event_loop(url: str) -> None:
    app = oncely.App(url)
    loops: set[int] = set()

    @app.job(overlap="allow")
    async def fetch(run: oncely.Run) -> None:
        loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0.05)

    for n in range(6):
        app.defer(fetch, at=_now(), key=f"a{n}")
    with serving(app, concurrency=3):
        eventually(lambda: all(_status(app, f"a{n}") == "succeeded" for n in range(6)))
    assert len(loops) == 1
    app.close()


def test_a_handler_longer_than_its_lease_keeps_it_by_heartbeats(url: str) -> None:
    app = oncely.App(url)
    lost: list[bool] = []

    @app.job(lease=timedelta(seconds=1))
    def long(run: oncely.Run) -> None:
        time.sleep(2.5)
        lost.append(run.lease_lost)

    app.defer(long, at=_now(), key="long")
    with serving(app), serving(oncely.App(url)) as other:
        eventually(lambda: _status(app, "long") == "succeeded", what="the long handler")
        assert other.in_flight == 0
    [occurrence] = app.history(key="long")
    assert occurrence.attempts == 1
    assert lost == [False]
    app.close()


def test_a_handler_whose_lease_is_taken_over_is_told_and_its_completion_refused(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    if url.startswith("sqlite"):
        pytest.skip("a second app ticking while the first worker runs is covered on PostgreSQL")
    app = oncely.App(url)
    release = threading.Event()
    seen: list[bool] = []

    @app.job(lease=timedelta(seconds=3))
    def pay(run: oncely.Run) -> None:
        release.wait(20)
        seen.append(run.lease_lost)

    thief = oncely.App(url, clock=lambda: _now() + timedelta(seconds=10))

    @thief.job(lease=timedelta(seconds=3))
    def pay(run: oncely.Run) -> None:  # noqa: F811 -- the same job, in another instance
        seen.append(False)

    app.defer("pay", at=_now(), key="pay")
    with caplog.at_level(logging.WARNING, logger="oncely"), serving(app) as worker:
        eventually(lambda: worker.in_flight == 1, what="the handler to start")
        # The other instance's clock is 10 s ahead: for it the lease has expired, as it would
        # have for real had this process been paused; it takes the occurrence over.
        assert thief.tick().ran == 1
        eventually(lambda: "lease lost to another worker" in caplog.text, what="the heartbeat")
        release.set()
        eventually(lambda: "completion is refused" in caplog.text, what="the refusal")
    [occurrence] = app.history(key="pay")
    assert (occurrence.status, occurrence.attempts) == ("succeeded", 2)
    assert seen == [False, True]
    thief.close()
    app.close()


def test_housekeeping_prunes_old_history_once_per_fleet(url: str) -> None:
    old = _now() - timedelta(days=40)
    past = oncely.App(url, clock=lambda: old)

    @past.job()
    def report(run: oncely.Run) -> None: ...

    past.defer(report, at=old, key="old")
    past.tick()
    assert _status(past, "old") == "succeeded"
    past.close()

    apps = [oncely.App(url), oncely.App(url)]
    for app in apps:
        app.job(name="report")(lambda run: None)
    with serving(apps[0]), serving(apps[1]):
        eventually(lambda: apps[0].history(key="old") == [], what="the old run to be pruned")
        time.sleep(0.3)
    sweeps = apps[0].store.sweeps()
    assert len(sweeps) == 1
    assert sweeps[0].pruned == 1
    for app in apps:
        app.close()


def test_bad_worker_options_are_configuration_errors(url: str) -> None:
    app = oncely.App(url)
    for options in ({"concurrency": 0}, {"drain_timeout": -1}, {"http": "localhost"}):
        with pytest.raises(ConfigurationError):
            Worker(app, **options).run()
    app.close()


def test_more_transactional_handlers_than_pooled_connections_do_not_starve_the_loop(
    postgres_url: str,
) -> None:
    app = oncely.App(postgres_url)
    held = threading.Barrier(12, timeout=20)

    @app.job(delivery="transactional", overlap="allow")
    def write(run: oncely.Run) -> None:
        run.connection.execute("SELECT 1")
        held.wait()  # all twelve hold a connection at the same moment

    for n in range(12):
        app.defer(write, at=_now(), key=f"t{n}")
    with serving(app, concurrency=12):
        eventually(
            lambda: all(_status(app, f"t{n}") == "succeeded" for n in range(12)),
            timeout=30,
            what="twelve transactional handlers",
        )
    app.close()


def test_postgres_notify_wakes_a_sleeping_worker_at_once(postgres_url: str) -> None:
    app = oncely.App(postgres_url)
    ran: list[datetime] = []

    @app.job()
    def ping(run: oncely.Run) -> None:
        ran.append(_now())

    other = oncely.App(postgres_url)
    other.job(name="ping")(lambda run: None)
    with serving(app, wake_cap=30.0) as worker:
        eventually(lambda: worker.in_flight == 0 and app.store is not None)
        time.sleep(1.0)  # the worker is asleep now, until its 30 s cap
        deferred = _now()
        other.defer("ping", at=deferred, key="ping")
        eventually(lambda: len(ran) == 1, timeout=10, what="the deferred ping")
    print(f"deferred in another app; ran {(ran[0] - deferred).total_seconds() * 1000:.0f} ms later")
    assert (ran[0] - deferred).total_seconds() < 2.0
    other.close()
    app.close()


def test_handler_threads_wait_for_the_next_claims_and_end_with_the_worker(url: str) -> None:
    app = oncely.App(url)
    threads: list[threading.Thread] = []

    @app.job(overlap="allow")
    def note(run: oncely.Run) -> None:
        threads.append(threading.current_thread())

    with serving(app, concurrency=1, wake_cap=0.2):  # SQLite has no NOTIFY to wake it
        app.defer(note, at=_now(), key="first")
        eventually(lambda: len(threads) == 1, what="the first occurrence")
        app.defer(note, at=_now(), key="second")
        eventually(lambda: len(threads) == 2, what="the second occurrence")
    assert threads[0] is threads[1]
    threads[0].join(timeout=5)
    assert not threads[0].is_alive()
    app.close()


def _warm_up(app: oncely.App, job: oncely.Job, done: list[object], n: int = 20) -> None:
    """Run ``n`` quick occurrences first, so that the worker knows its handlers are quick."""
    for k in range(n):
        app.defer(job, at=_now(), key=f"warm{k}", payload=f"warm{k}")
    eventually(lambda: len(done) >= n, what="the warm-up")


def test_quick_handlers_are_run_by_a_few_threads_not_every_one(url: str) -> None:
    """Lesson from the burst benchmark: every handler thread woken for quick handlers made them
    take the GIL from each other and from the loop."""
    app = oncely.App(url)
    ran: list[object] = []
    lock = threading.Lock()
    inside, most = [0], [0]

    @app.job(overlap="allow")
    def quick(run: oncely.Run) -> None:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0)  # lets another awake thread take the GIL, as a handler's I/O does
        with lock:
            inside[0] -= 1
        ran.append(run.payload)

    with serving(app, concurrency=8, wake_cap=0.2):  # SQLite has no NOTIFY to wake it
        _warm_up(app, quick, ran)
        most[0] = 0
        # All due at one time, a moment ahead: they are written before any of them runs.
        due = _now() + timedelta(seconds=2)
        for n in range(60):
            app.defer(quick, at=due, key=f"q{n}", payload=n)
        eventually(lambda: len(ran) == 80, what="the burst")
    print(f"at most {most[0]} handler(s) at once")
    assert most[0] <= 3
    app.close()


def test_a_slow_handler_does_not_hold_up_quick_claims_waiting_behind_it(url: str) -> None:
    app = oncely.App(url)
    ran: list[object] = []
    release = threading.Event()

    @app.job(overlap="allow")
    def work(run: oncely.Run) -> None:
        if run.payload == "slow":
            release.wait(20)
        ran.append(run.payload)

    with serving(app, concurrency=8, wake_cap=0.2):
        _warm_up(app, work, ran)
        due = _now() - timedelta(seconds=1)
        # Claimed first (oldest first): the one busy thread takes it.
        app.defer(work, at=due - timedelta(seconds=1), key="slow", payload="slow")
        for n in range(20):
            app.defer(work, at=due, key=f"q{n}", payload=n)
        eventually(lambda: len(ran) == 40, what="the quick ones, while the slow one runs")
        assert "slow" not in ran
        release.set()
        eventually(lambda: "slow" in ran, what="the slow one")
    app.close()


def test_stopping_gives_back_claims_that_never_started(url: str) -> None:
    app = oncely.App(url)
    started = threading.Event()

    @app.job(overlap="allow")
    def slow(run: oncely.Run) -> None:
        started.set()
        time.sleep(1.0)

    for n in range(2):
        app.defer(slow, at=_now(), key=f"s{n}")
    with serving(app, concurrency=1) as worker:
        eventually(started.is_set, what="the first handler")
        eventually(lambda: {_status(app, "s0"), _status(app, "s1")} == {"running"})
        assert worker.in_flight == 1
        assert b"\noncely_in_flight 1.0\n" in worker.metrics.render()
    statuses = sorted(
        (_status(app, f"s{n}"), app.history(key=f"s{n}")[0].attempts) for n in range(2)
    )
    assert statuses == [("pending", 0), ("succeeded", 1)]
    app.close()


def test_a_worker_gives_back_queued_claims_its_slow_handlers_will_not_reach_soon(
    url: str,
) -> None:
    app = oncely.App(url)
    release = threading.Event()

    @app.job(overlap="allow")
    def quick(run: oncely.Run) -> None:
        pass

    @app.job(overlap="allow")
    def slow(run: oncely.Run) -> None:
        release.wait(30)

    for n in range(30):
        app.defer(quick, at=_now(), key=f"q{n}")
    with serving(app, concurrency=2, wake_cap=0.2):
        eventually(
            lambda: len(app.history(status="succeeded", limit=100)) == 30, what="the quick ones"
        )
        # Quick handlers made the queue long: the slow ones, due together, are all claimed at
        # once when they come due.
        due = _now() + timedelta(seconds=1)
        for n in range(40):
            app.defer(slow, at=due, key=f"s{n}")
        eventually(lambda: len(app.history(status="running", limit=100)) > 2, what="a claim")
        try:
            # Two run; of the 38 queued behind them at most twice 2 stay (two slots, one
            # second's worth of handlers that each take longer than that); the rest go back.
            eventually(
                lambda: len(app.history(status="pending", limit=100)) >= 34,
                what="queued slow claims to be given back",
            )
            assert len(app.history(status="running", limit=100)) <= 6
        finally:
            release.set()
        eventually(
            lambda: len(app.history(status="succeeded", limit=100)) == 70, what="all of them"
        )
    app.close()


def _eventually_in_metrics(worker: Worker, sample: str) -> None:
    eventually(lambda: sample in worker.metrics.render().decode(), what=f"metrics with {sample}")


def test_every_booked_occurrence_is_counted_in_the_metrics(url: str) -> None:
    # Booked in batches and counted once per job and outcome: each batch counts all it booked.
    app = oncely.App(url)

    @app.job(overlap="allow")
    def ping(run: oncely.Run) -> None:
        pass

    for n in range(60):
        app.defer(ping, at=_now(), key=f"p{n}")
    with serving(app) as worker:
        _eventually_in_metrics(
            worker, 'oncely_occurrences_total{job="ping",status="succeeded"} 60.0'
        )
    app.close()


def test_an_abandoned_at_most_once_occurrence_is_counted_in_the_metrics(url: str) -> None:
    lost, app = oncely.App(url), oncely.App(url)
    for each in (lost, app):

        @each.job(delivery="at_most_once", lease=timedelta(seconds=1))
        def charge(run: oncely.Run) -> None:
            pass

    lost.defer("charge", at=_now(), key="c1")
    assert [c.key for c in lost._the_engine().claim(5)] == ["c1"]  # then its process dies
    time.sleep(1.1)
    with serving(app) as worker:
        eventually(lambda: _status(app, "c1") == "abandoned", what="c1 abandoned")
        # Counted once the tick's later steps are done too, a moment after the row changed.
        _eventually_in_metrics(
            worker, 'oncely_occurrences_total{job="charge",status="abandoned"} 1.0'
        )
    lost.close()
    app.close()


def test_a_claim_whose_lease_ran_out_while_it_waited_is_not_started(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from oncely.testing import Clock
    from oncely.worker.pool import Held

    clock = Clock(_now())
    app = oncely.App(url, clock=clock)
    ran: list[str] = []

    @app.job(lease=timedelta(seconds=4))
    def report(run: oncely.Run) -> None:
        ran.append(run.key)

    app.defer(report, at=clock(), key="r1")
    worker = Worker(app)
    (claim,) = worker.engine.claim(5)
    clock.advance(seconds=5)  # the loop, starved, never extended it
    with caplog.at_level(logging.WARNING, logger="oncely"):
        assert worker._pool.run_one(Held(claim, worker.engine.jobs["report"])) is None
    assert ran == []
    assert "its lease ran out while it waited for a handler slot" in caplog.text
    assert [c.key for c in app._the_engine().claim(5)] == ["r1"]  # free for any worker
    app.close()


def test_a_claim_whose_lease_ran_out_while_it_waited_is_given_back_not_abandoned(
    url: str,
) -> None:
    from oncely.testing import Clock
    from oncely.worker.pool import Held

    clock = Clock(_now())
    app = oncely.App(url, clock=clock)

    @app.job(lease=timedelta(seconds=4), delivery="at_most_once")
    def charge(run: oncely.Run) -> None:
        pass

    app.defer(charge, at=clock(), key="c1")
    worker = Worker(app)
    (claim,) = worker.engine.claim(5)
    clock.advance(seconds=5)  # the loop, starved, never extended it
    assert worker._pool.run_one(Held(claim, worker.engine.jobs["charge"])) is None
    app.tick()  # abandons lost at_most_once attempts, then claims
    (occurrence,) = app.history(key="c1")
    assert (occurrence.status, occurrence.attempts) == ("succeeded", 1)
    app.close()


def test_claims_taken_ahead_start_on_time_while_the_next_due_time_is_prepared(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lesson from the lag benchmark: a prepare slower than two thirds of the gap between due
    times made the lead longer than the gap, so the next second's prepare held the loop when
    this second's claims came due, and they started only once it was over."""
    from oncely.engine import Engine, TickReport

    app = oncely.App(url)
    started: list[tuple[float, float]] = []  # (scheduled_for, start), epoch seconds
    prepares: list[tuple[float, float, float]] = []  # ahead prepares: (start, end, ahead_to)
    slow_prepare = Engine.prepare

    def prepare(engine: Engine, report: TickReport, **kwargs: Any) -> None:
        began = time.time()
        slow_prepare(engine, report, **kwargs)
        ahead_to = kwargs.get("ahead_to")
        if ahead_to is not None:
            time.sleep(0.7)  # the lead becomes 1.5 x 0.7 s: longer than the 1 s gap
            prepares.append((began, time.time(), ahead_to.timestamp()))

    monkeypatch.setattr(Engine, "prepare", prepare)

    @app.job()
    def tick(run: oncely.Run) -> None:
        started.append((run.scheduled_for.timestamp(), time.time()))

    app.schedule(tick, oncely.every(seconds=1), key="t")
    with serving(app):
        eventually(lambda: len(prepares) >= 8, timeout=30, what="eight ahead prepares")
    waited = [
        (due, start, (began, end, to))
        for due, start in started
        for began, end, to in prepares
        if began < due <= end and to > due and start >= end
    ]
    assert len(started) >= 3
    assert waited == []
    app.close()


def test_a_backlog_is_claimed_cycle_after_cycle_without_preparing_again(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lesson from the burst benchmark: counting the waiting backlog as due made every cycle of
    a drain prepare again (materialise and the wake-up queries): more than a quarter of the
    loop's time."""
    from oncely.engine import Engine, TickReport
    from oncely.worker import pacing

    app = oncely.App(url)
    prepares, claims = [0], [0]
    prepare, claim = Engine.prepare, Engine.claim

    def counted_prepare(engine: Engine, report: TickReport, **kwargs: Any) -> None:
        prepares[0] += 1
        prepare(engine, report, **kwargs)

    def counted_claim(engine: Engine, limit: int, **kwargs: Any) -> list[Any]:
        claims[0] += 1
        return claim(engine, limit, **kwargs)

    monkeypatch.setattr(Engine, "prepare", counted_prepare)
    monkeypatch.setattr(Engine, "claim", counted_claim)
    # Five claims at a time (one handler, four waiting): the backlog outlasts twenty claims.
    monkeypatch.setattr(pacing, "PREFETCH_MAX", 4)
    done: list[int] = []

    @app.job(overlap="allow")
    def item(run: oncely.Run) -> None:
        done.append(run.payload)

    for n in range(100):
        app.defer(item, at=_now(), key=f"i{n}", payload=n)
    with serving(app, concurrency=1):
        eventually(lambda: len(done) == 100, what="the backlog")
    assert claims[0] >= 20
    assert prepares[0] <= 3
    app.close()


def test_a_worker_behind_many_due_schedules_runs_some_before_it_has_written_them_all(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lesson from the bad-input fault test: a worker that started with 6,000 overdue schedules
    wrote every one of them (two seconds) before it ran any, and its every-second schedules
    skipped the seconds meanwhile. Here 40 due schedules take twenty slow batches to write."""
    from oncely.engine import tick

    app = oncely.App(url)
    written: list[float] = []  # when each batch was written (monotonic)
    started: list[float] = []
    store = type(app.store)
    materialise = store.materialise_many

    def slow(self: Any, batch: Any, now: datetime) -> Any:
        time.sleep(0.05)
        done = materialise(self, batch, now)
        written.append(time.monotonic())
        return done

    monkeypatch.setattr(store, "materialise_many", slow)
    monkeypatch.setattr(tick, "_SCHEDULE_BATCH", 2)

    @app.job(overlap="allow")
    def item(run: oncely.Run) -> None:
        started.append(time.monotonic())

    for n in range(40):
        app.schedule(item, oncely.every(seconds=2), key=f"i{n}")
    time.sleep(2.1)  # every one of them is due
    with serving(app):
        eventually(lambda: len(written) >= 20 and started, timeout=30, what="twenty batches")
    assert started[0] < written[19], "the first run waited for every batch to be written"
    app.close()


def test_the_lead_grows_at_once_and_shrinks_slowly() -> None:
    """Lesson from the lag benchmark: the lead was the last prepare's time, so one quick prepare
    cut it to milliseconds and the next second's rows, written after all, came late."""
    from oncely.worker.pacing import LEAD_MAX, LEAD_MIN, Lead

    lead = Lead()
    assert lead.seconds == LEAD_MIN
    lead.learn(0.5)
    assert lead.seconds == pytest.approx(0.75)
    lead.learn(0.001)
    assert lead.seconds == pytest.approx(0.675)
    for _ in range(100):
        lead.learn(0.001)
    assert lead.seconds == LEAD_MIN
    lead.learn(60.0)
    assert lead.seconds == LEAD_MAX


def test_waiting_out_what_it_cannot_claim_a_worker_still_wakes_for_the_next_due_time(
    url: str,
) -> None:
    """Lesson from the lag benchmark: a worker that found an occurrence due but not its to claim
    slept five seconds, blind to the schedules due every second meanwhile."""
    from oncely.testing import Clock

    clock = Clock(_now())
    app = oncely.App(url, clock=clock)

    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    app.defer(remind, at=clock(), key="due-now")  # due; say another worker's to start
    app.defer(remind, at=clock() + timedelta(seconds=1), key="next")
    worker = Worker(app)
    assert worker._cycle.next_due(clock()) == clock() + timedelta(seconds=1)
    app.close()


def test_a_wake_up_after_a_sleep_ends_the_next_sleep_too() -> None:
    from oncely.worker.wakeups import Wake

    wake = Wake()
    for _ in range(3):
        wake.set()
        wake.set()  # a second one before the sleep adds nothing
        began = time.monotonic()
        wake.wait(5.0)
        assert time.monotonic() - began < 1.0
    began = time.monotonic()
    wake.wait(0.2)  # nothing set since: it sleeps the whole timeout
    assert time.monotonic() - began >= 0.2


def test_a_wake_up_set_while_the_pipe_drains_is_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    from oncely.worker import wakeups
    from oncely.worker.wakeups import Wake

    wake = Wake()
    wake.set()
    read = os.read
    reads = 0

    def read_with_a_handler_finishing(fd: int, n: int) -> bytes:
        # A handler thread finishes between two reads of the drain.
        nonlocal reads
        reads += 1
        if reads == 1:
            wake.set()
        return read(fd, n)

    monkeypatch.setattr(wakeups.os, "read", read_with_a_handler_finishing)
    wake.wait(0)
    monkeypatch.setattr(wakeups.os, "read", read)
    wake.set()  # the next handler to finish
    began = time.monotonic()
    wake.wait(5.0)
    assert time.monotonic() - began < 1.0


def test_a_wake_up_from_another_thread_ends_a_sleep_at_once() -> None:
    from oncely.worker.wakeups import Wake

    wake = Wake()
    wake.set()
    wake.wait(0)  # as the loop does between two cycles
    setter = threading.Timer(0.1, wake.set)
    setter.start()
    began = time.monotonic()
    wake.wait(5.0)
    setter.join()
    assert time.monotonic() - began < 1.0


def test_a_wake_up_ends_a_sleep_whose_pipe_is_above_select_s_limit() -> None:
    """Lesson from the engine model: after it, the process held a thousand descriptors, the
    next worker's pipe was above 1024, and its loop died: "filedescriptor out of range"."""
    import resource

    from oncely.worker.wakeups import Wake

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2048:  # a machine whose default is 1024 could not open the filler
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(2048, hard), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        wake = Wake()
        assert wake._read > 1024
        wake.set()
        began = time.monotonic()
        wake.wait(5.0)
        assert time.monotonic() - began < 1.0
    finally:
        for descriptor in filler:
            os.close(descriptor)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_worker_that_is_gone_leaves_no_descriptor_open() -> None:
    import gc

    from oncely.worker.wakeups import Wake

    def pipe_of(descriptor: int) -> int | None:
        """The pipe's inode behind ``descriptor``; None once it is closed."""
        try:
            return os.fstat(descriptor).st_ino
        except OSError:
            return None

    wakes = [Wake() for _ in range(20)]
    pipes = {fd: pipe_of(fd) for wake in wakes for fd in (wake._read, wake._write)}
    del wakes
    gc.collect()
    # Closed, or the number taken since by another file (other threads open files meanwhile).
    assert [fd for fd, pipe in pipes.items() if pipe_of(fd) == pipe] == []
