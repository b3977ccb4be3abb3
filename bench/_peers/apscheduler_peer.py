"""APScheduler 4: the burst as one task, ``add_job`` per job, run by worker-role schedulers.

Settings (see ``SETTINGS``): ``SQLAlchemyDataStore`` on a psycopg engine plus
``PsycopgEventBroker``, the documented pairing when several schedulers share one database (the
broker relays "job added/released" between processes over LISTEN/NOTIFY). Workers run with
``role=SchedulerRole.worker`` and the default ``max_concurrent_jobs=100`` (300 was no faster
with 1 worker and slower with 2). Not asyncpg: with anyio >= 4.14, ``AsyncpgEventBroker`` drops
every notification (``NoEventLoopError`` in its listener callback; agronholm/apscheduler issue
#1141), so a worker never hears that its own jobs were released and stops after its first
``max_concurrent_jobs`` jobs.

One setting is essential: a task defaults to ``max_running_jobs=1`` *across all schedulers*,
which would run the burst one job at a time; the task is configured with
``max_running_jobs=None`` (no limit), by the enqueuer and identically by every worker (a
``configure_task`` call with different settings would overwrite the stored task).

APScheduler has no batch enqueue: ``add_job`` is one call (and transaction) per job. The
enqueuer issues ``ENQUEUE_CONCURRENCY`` of them at a time.

When a scheduler in this (orchestrating) process exits, psycopg logs a warning as the broker's
LISTEN connection is cancelled; it is harmless, and silenced.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from apscheduler import AsyncScheduler, SchedulerRole
from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
from apscheduler.eventbrokers.psycopg import PsycopgEventBroker
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from _peers import harness

DISTRIBUTIONS = ("apscheduler", "sqlalchemy", "psycopg", "anyio")
TASK_ID = "bench_burst"
MAX_CONCURRENT_JOBS = 100
ENQUEUE_CONCURRENCY = 10

#: Jobs in this peer's burst, when ``--jobs`` asks for more. At its rate (about 130 jobs/s on a
#: 2-core machine) 20,000 jobs took minutes per run, and ten runs most of ``make bench``'s time.
#: Its jobs/s is measured on this smaller backlog: a smaller queue table is no harder to drain.
BURST_JOBS = 2_000
SETTINGS: dict[str, Any] = {
    "burst": f"at most {BURST_JOBS:,} jobs (the rest of its burst is the same)",
    "data_store": "SQLAlchemyDataStore (postgresql+psycopg)",
    "event_broker": "PsycopgEventBroker",
    "role": "worker",
    "max_concurrent_jobs": MAX_CONCURRENT_JOBS,
    "task_max_running_jobs": None,
    "enqueue": f"AsyncScheduler.add_job, one job per call, {ENQUEUE_CONCURRENCY} calls at a time",
}
UNFINISHED_SQL = "SELECT count(*) FROM jobs"

logging.getLogger("psycopg").setLevel(logging.ERROR)


async def burst(n: int) -> None:
    """The task's callable (referenced as ``_peers.apscheduler_peer:burst``)."""
    harness.record(n)


def engine_for(dsn: str) -> AsyncEngine:
    return create_async_engine(dsn.replace("postgresql://", "postgresql+psycopg://", 1))


def scheduler_for(engine: AsyncEngine, **options: Any) -> AsyncScheduler:
    return AsyncScheduler(
        SQLAlchemyDataStore(engine), PsycopgEventBroker.from_async_sqla_engine(engine), **options
    )


async def _configure(scheduler: AsyncScheduler) -> None:
    await scheduler.configure_task(TASK_ID, func=burst, max_running_jobs=None)


async def install(dsn: str) -> None:
    """Let the data store create its tables, and store the task definition."""
    engine = engine_for(dsn)
    try:
        async with scheduler_for(engine) as scheduler:
            await _configure(scheduler)
    finally:
        await engine.dispose()


async def enqueue(dsn: str, jobs: int) -> None:
    """Add jobs ``0..jobs-1`` (positional argument: the number)."""
    engine = engine_for(dsn)
    numbers = iter(range(jobs))

    async def adder(scheduler: AsyncScheduler) -> None:
        for n in numbers:  # the iterator is shared, so each number is taken once
            await scheduler.add_job(TASK_ID, args=[n])

    try:
        async with scheduler_for(engine) as scheduler, anyio.create_task_group() as group:
            for _ in range(ENQUEUE_CONCURRENCY):
                group.start_soon(adder, scheduler)
    finally:
        await engine.dispose()


async def work(dsn: str) -> None:
    """Run one worker-role AsyncScheduler until the process is killed."""
    engine = engine_for(dsn)
    async with scheduler_for(
        engine, role=SchedulerRole.worker, max_concurrent_jobs=MAX_CONCURRENT_JOBS
    ) as scheduler:
        await _configure(scheduler)
        await scheduler.run_until_stopped()


def unfinished(dsn: str) -> int:
    """Jobs this peer's tables still hold as not finished."""
    return harness.unfinished(dsn, UNFINISHED_SQL)
