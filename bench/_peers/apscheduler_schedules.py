"""APScheduler 4: ``IntervalTrigger`` schedules and ``DateTrigger`` one-offs.

Every mode is APScheduler's own. Recurring: ``schedules`` schedules
``add_schedule(TASK_ID, IntervalTrigger(seconds=1, start_time=<a whole second>), id="s<n>")``.
Idle: the same with ``IntervalTrigger(hours=1, start_time=<start>)``.
One-off: one ``add_schedule(TASK_ID, DateTrigger(<second>), id="s<n>@<second>")`` per job
(a job due later is a schedule in APScheduler 4: ``add_job`` runs at once), ``ENQUEUE_CONCURRENCY``
calls at a time, as for the burst (it has no batch API). The handler reads the time the run was
scheduled for from ``current_job.get().scheduled_fire_time``.

Settings as for the burst (``apscheduler_peer``): ``SQLAlchemyDataStore`` on psycopg with
``PsycopgEventBroker``, ``max_concurrent_jobs=100``, the task configured with
``max_running_jobs=None`` (its default of 1 would run one job at a time across all schedulers).
Each worker process runs an ``AsyncScheduler`` in its default role, both (turning due schedules
into jobs, and running jobs), since nothing else would process the schedules. The schedules keep
APScheduler's defaults: coalesce "latest" (a schedule found late fires once, for its latest
missed time: the others count as misses here), no misfire grace time, no jitter.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import anyio
from apscheduler import AsyncScheduler, current_job
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from _peers import lag
from _peers.apscheduler_peer import MAX_CONCURRENT_JOBS, engine_for, scheduler_for

DISTRIBUTIONS = ("apscheduler", "sqlalchemy", "psycopg", "anyio")
TASK_ID = "bench_lag"
ENQUEUE_CONCURRENCY = 10
MODES = {
    "recurring": "add_schedule(IntervalTrigger(seconds=1)) per key",
    "oneoff": "add_schedule(DateTrigger(at)) per job",
    "idle": "add_schedule(IntervalTrigger(hours=1)) per key",
}
SETTINGS: dict[str, Any] = {
    "data_store": "SQLAlchemyDataStore (postgresql+psycopg)",
    "event_broker": "PsycopgEventBroker",
    "role": "both (default)",
    "max_concurrent_jobs": MAX_CONCURRENT_JOBS,
    "task_max_running_jobs": None,
    "schedules": "defaults: coalesce latest, no misfire grace time, no jitter",
    "enqueue": f"add_schedule, one per call, {ENQUEUE_CONCURRENCY} calls at a time",
}
RECORDS_NEXT_DUE = False


async def fire(key: str) -> None:
    """The task's callable (``_peers.apscheduler_schedules:fire``)."""
    started = time.time()
    due = current_job.get().scheduled_fire_time
    assert due is not None, "a scheduled job has a fire time"
    lag.record(key, due.timestamp(), started)


async def _configure(scheduler: AsyncScheduler) -> None:
    await scheduler.configure_task(TASK_ID, func=fire, max_running_jobs=None)


async def install(dsn: str) -> None:
    """Let the data store create its tables, and store the task definition."""
    engine = engine_for(dsn)
    try:
        async with scheduler_for(engine) as scheduler:
            await _configure(scheduler)
    finally:
        await engine.dispose()


async def plan(dsn: str, mode: str, schedules: int, slots: Sequence[int]) -> None:
    """Add the recurring schedules (from ``slots[0]``) or the one-offs due at every slot."""
    if mode in ("recurring", "idle"):
        start = datetime.fromtimestamp(slots[0], UTC)
        every = {"seconds": 1} if mode == "recurring" else {"hours": 1}
        additions = [
            (f"s{n}", IntervalTrigger(**every, start_time=start), f"s{n}") for n in range(schedules)
        ]
    else:
        additions = [
            (f"s{n}@{second}", DateTrigger(datetime.fromtimestamp(second, UTC)), f"s{n}")
            for second in slots
            for n in range(schedules)
        ]
    pending = iter(additions)
    engine = engine_for(dsn)

    async def adder(scheduler: AsyncScheduler) -> None:
        for schedule_id, trigger, key in pending:  # shared, so each is added once
            await scheduler.add_schedule(TASK_ID, trigger, id=schedule_id, kwargs={"key": key})

    try:
        async with scheduler_for(engine) as scheduler, anyio.create_task_group() as group:
            for _ in range(ENQUEUE_CONCURRENCY):
                group.start_soon(adder, scheduler)
    finally:
        await engine.dispose()


async def work(dsn: str, mode: str, schedules: int, start: int) -> None:
    """Run one AsyncScheduler (role both) until the process is killed."""
    engine = engine_for(dsn)
    async with scheduler_for(engine, max_concurrent_jobs=MAX_CONCURRENT_JOBS) as scheduler:
        await _configure(scheduler)
        await scheduler.run_until_stopped()
