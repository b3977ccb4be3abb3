"""procrastinate: the burst as one task, deferred in batches, run by ``App.run_worker_async``.

Settings (see ``SETTINGS``): the handler is ``async``, so each worker runs with
``concurrency=CONCURRENCY``, procrastinate's documented way to run async tasks side by side in
one worker (the default is 1). The worker fetches one job per query, one after the other, and
persists each job's status with its own query; a few jobs in flight hide the latter. Measured
here (5,000 jobs, 1 worker, single runs): concurrency 1, 4, 10 and 30 gave 262, 229, 302 and
319 jobs/s, and 10 vs 30 with 2 workers 400 vs 380: the fetch query is the bottleneck, not the
concurrency. The psycopg pool gets one connection per job in flight plus two (the LISTEN
connection and the fetch loop). Everything else is default: LISTEN/NOTIFY on, jobs kept after
success (``delete_jobs="never"``), no retries.
"""

from __future__ import annotations

from typing import Any

import procrastinate

from _peers import harness

DISTRIBUTIONS = ("procrastinate", "psycopg", "psycopg-pool")
TASK = "bench_burst"
CONCURRENCY = 10
POOL_SIZE = CONCURRENCY + 2
#: Jobs per ``batch_defer_async`` call (one INSERT each).
DEFER_BATCH = 1000

#: Jobs in this peer's burst, when ``--jobs`` asks for more. At its rate (about 230 jobs/s on a
#: 2-core machine) 20,000 jobs took minutes per run, and ten runs most of ``make bench``'s time.
#: Its jobs/s is measured on this smaller backlog: a smaller queue table is no harder to drain.
BURST_JOBS = 4_000
SETTINGS: dict[str, Any] = {
    "burst": f"at most {BURST_JOBS:,} jobs (the rest of its burst is the same)",
    "driver": "psycopg (PsycopgConnector)",
    "concurrency": CONCURRENCY,
    "pool_max_size": POOL_SIZE,
    "listen_notify": True,
    "delete_jobs": "never",
    "enqueue": f"Task.batch_defer_async, {DEFER_BATCH} jobs per call",
}
UNFINISHED_SQL = "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"


def _app(dsn: str, pool_size: int) -> tuple[procrastinate.App, Any]:
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=dsn, min_size=1, max_size=pool_size)
    )

    @app.task(name=TASK)
    async def burst(n: int) -> None:
        harness.record(n)

    return app, burst


async def install(dsn: str) -> None:
    """Create procrastinate's schema in the (new, empty) database."""
    app, _ = _app(dsn, 1)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def enqueue(dsn: str, jobs: int) -> None:
    """Defer jobs ``0..jobs-1``, ``DEFER_BATCH`` per call."""
    app, burst = _app(dsn, 1)
    async with app.open_async():
        for start in range(0, jobs, DEFER_BATCH):
            stop = min(start + DEFER_BATCH, jobs)
            await burst.batch_defer_async(*({"n": n} for n in range(start, stop)))


async def work(dsn: str) -> None:
    """Run one procrastinate worker until the process is killed."""
    app, _ = _app(dsn, POOL_SIZE)
    async with app.open_async():
        await app.run_worker_async(
            concurrency=CONCURRENCY, wait=True, install_signal_handlers=False
        )


def unfinished(dsn: str) -> int:
    """Jobs this peer's tables still hold as not finished."""
    return harness.unfinished(dsn, UNFINISHED_SQL)
