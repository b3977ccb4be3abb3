"""pgqueuer: the burst as one entrypoint, enqueued in batches, run by ``QueueManager.run``.

Settings (see ``SETTINGS``): pgqueuer's documented set-up, one asyncpg connection per
``QueueManager`` wrapped in ``AsyncpgDriver``. pgqueuer dequeues ``batch_size`` jobs per query
and acknowledges finished jobs in batches of the same size, so ``batch_size`` is its throughput
knob. Measured here (20,000 jobs, medians of 3 runs, 1 and 2 workers): the default of 10 gives
about 6,000 jobs/s; 100, 250, 500 and 1,000 all give 12,000-13,600, within noise of each other.
``BATCH_SIZE`` is set in the middle of that plateau. No per-entrypoint or global concurrency
limit (``max_concurrent_tasks=None``, the default), the default durability (logged tables),
LISTEN/NOTIFY on.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from pgqueuer import AsyncpgDriver, QueueManager
from pgqueuer.models import Job
from pgqueuer.queries import Queries

from _peers import harness

DISTRIBUTIONS = ("pgqueuer", "asyncpg")
ENTRYPOINT = "bench_burst"
BATCH_SIZE = 250
#: Jobs per ``Queries.enqueue`` call (one INSERT ... unnest each).
ENQUEUE_BATCH = 1000

SETTINGS: dict[str, Any] = {
    "driver": "asyncpg (AsyncpgDriver, one connection per worker)",
    "batch_size": BATCH_SIZE,
    "max_concurrent_tasks": None,
    "durability": "default (logged tables)",
    "enqueue": f"Queries.enqueue with lists, {ENQUEUE_BATCH} jobs per call",
}
UNFINISHED_SQL = "SELECT count(*) FROM pgqueuer"


async def install(dsn: str) -> None:
    """Create pgqueuer's tables, types and triggers in the (new, empty) database."""
    conn = await asyncpg.connect(dsn)
    try:
        await Queries(AsyncpgDriver(conn)).install()
    finally:
        await conn.close()


async def enqueue(dsn: str, jobs: int) -> None:
    """Enqueue jobs ``0..jobs-1`` (payload: the number in ASCII), ``ENQUEUE_BATCH`` per call."""
    conn = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        for start in range(0, jobs, ENQUEUE_BATCH):
            numbers = range(start, min(start + ENQUEUE_BATCH, jobs))
            await queries.enqueue(
                [ENTRYPOINT] * len(numbers),
                [str(n).encode() for n in numbers],
                [0] * len(numbers),
            )
    finally:
        await conn.close()


async def work(dsn: str) -> None:
    """Run one pgqueuer QueueManager until the process is killed."""
    conn = await asyncpg.connect(dsn)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))

    @qm.entrypoint(ENTRYPOINT)
    async def burst(job: Job) -> None:
        assert job.payload is not None
        harness.record(int(job.payload))

    await qm.run(batch_size=BATCH_SIZE)


def unfinished(dsn: str) -> int:
    """Jobs this peer's tables still hold as not finished."""
    return harness.unfinished(dsn, UNFINISHED_SQL)
