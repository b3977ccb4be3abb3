"""pgqueuer: cron schedules (every second, hourly) and jobs enqueued with ``execute_after``.

Recurring: ``schedules`` schedules on one ``SchedulerManager`` per worker, entrypoints
``s0..``, each ``"* * * * * *"``. pgqueuer documents five-field cron (at most once a minute),
but it validates and expands expressions with croniter, which takes an optional sixth column of
seconds, and it runs them: this is the closest pgqueuer comes, and it is outside what it
documents. A schedule is one row: a worker picks it when its ``next_run`` has passed, sets
``next_run`` to the next cron time after now (a schedule found late fires once; the seconds it
missed count as misses here), runs the function in-process, then releases the row. Its loop
sleeps until the next cron time plus one second of leeway. The function receives the row as
updated by the pick, whose ``next_run`` is already the *next* due time, so the handler records
that and the figures take each run's own due time from the run before it
(``RECORDS_NEXT_DUE``; exact, since a row is not picked again before its run is released). The
first run of each schedule has no predecessor and is left out (it falls in the start-up margin).

One-off: per second of the run, one ``Queries.enqueue`` call (one INSERT) for its ``schedules``
jobs with ``execute_after`` = that second minus the client's clock just before the call (pgqueuer
takes a delay and adds the database's ``NOW()``: the milliseconds between count against it).
Worker: ``QueueManager.run(batch_size=250)`` as for the burst (``pgqueuer_peer``); it sleeps until
the next deferred job's ``execute_after`` when nothing is ready.

Idle: ``schedules`` schedules ``"<m> * * * *"`` (documented five-field cron), hourly at the
minute of ``start``, on one ``SchedulerManager``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import asyncpg
from pgqueuer import AsyncpgDriver, QueueManager
from pgqueuer.models import Job, Schedule
from pgqueuer.queries import Queries
from pgqueuer.sm import SchedulerManager

from _peers import lag
from _peers.idle import hourly_cron
from _peers.pgqueuer_peer import BATCH_SIZE

DISTRIBUTIONS = ("pgqueuer", "asyncpg", "croniter")
ENTRYPOINT = "bench_lag"
CRON_EVERY_SECOND = "* * * * * *"
MODES = {
    "recurring": f'SchedulerManager.schedule(key, "{CRON_EVERY_SECOND}"): undocumented seconds',
    "oneoff": "Queries.enqueue(execute_after=...), one call per second",
    "idle": 'SchedulerManager.schedule(key, "<m> * * * *")',
}
SETTINGS: dict[str, Any] = {
    "driver": "asyncpg (AsyncpgDriver, one connection per worker)",
    "recurring": f"SchedulerManager, one schedule per key, {CRON_EVERY_SECOND!r}",
    "oneoff_batch_size": BATCH_SIZE,
}
RECORDS_NEXT_DUE = True


async def install(dsn: str) -> None:
    """Create pgqueuer's tables, types and triggers in the (new, empty) database."""
    conn = await asyncpg.connect(dsn)
    try:
        await Queries(AsyncpgDriver(conn)).install()
    finally:
        await conn.close()


async def plan(dsn: str, mode: str, schedules: int, slots: Sequence[int]) -> None:
    """Enqueue the one-offs due at every second of ``slots`` (schedules are code: nothing)."""
    if mode != "oneoff":
        return
    conn = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        entrypoints, priorities = [ENTRYPOINT] * schedules, [0] * schedules
        for second in slots:
            payloads: list[bytes | None] = [f"s{n} {second}".encode() for n in range(schedules)]
            delay: timedelta | None = timedelta(seconds=second - time.time())
            await queries.enqueue(
                entrypoints, payloads, priorities, execute_after=[delay] * schedules
            )
    finally:
        await conn.close()


async def work(dsn: str, mode: str, schedules: int, start: int) -> None:
    """Run one SchedulerManager (schedules) or QueueManager (one-offs) until killed."""
    conn = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(conn))
    if mode != "oneoff":
        manager = SchedulerManager(queries)
        cron = CRON_EVERY_SECOND if mode == "recurring" else hourly_cron(start)

        async def fire(schedule: Schedule) -> None:
            started = time.time()
            lag.record(schedule.entrypoint, schedule.next_run.timestamp(), started)

        for n in range(schedules):
            manager.schedule(f"s{n}", cron)(fire)
        await manager.run()
        return

    qm = QueueManager(queries)

    @qm.entrypoint(ENTRYPOINT)
    async def once(job: Job) -> None:
        started = time.time()
        assert job.payload is not None
        key, second = job.payload.split()
        lag.record(key.decode(), float(second), started)

    await qm.run(batch_size=BATCH_SIZE)
