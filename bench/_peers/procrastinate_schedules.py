"""procrastinate: periodic tasks (every second, hourly) and jobs deferred with ``schedule_at``.

Recurring: one task registered ``schedules`` times with ``app.periodic(cron="* * * * * *",
periodic_id="s<n>", task_kwargs={"key": "s<n>"})``: procrastinate's documented optional sixth
cron column (seconds), "as frequent as 1 per second". Periodic tasks live in code, so every
worker registers them and runs the periodic deferrer; the database lets one defer of each
(task, periodic id, second) through. The task receives ``timestamp``, the second the run was
scheduled for. By design the deferrer wakes half a second after each due second
(``procrastinate.periodic.MARGIN``) and defers the due tasks one query each.

One-off: per second of the run, one ``task.configure(schedule_at=<second>).batch_defer_async``
call (one INSERT) for its ``schedules`` jobs, each passed its key and second.

Idle: ``schedules`` periodic registrations ``cron="<m> * * * *"``, hourly at the minute of
``start``, which ``_peers.idle`` places far enough ahead that none comes due, nor was due in the
last 10 minutes (the deferrer defers, at start, what it finds that recent).

Worker settings as for the burst (``procrastinate_peer``): ``concurrency=10``, LISTEN/NOTIFY on,
the default fetch polling interval (5 s: a job whose ``schedule_at`` passes while every worker
waits is fetched at the next poll or notification), a psycopg pool of one connection per job in
flight plus three (LISTEN, fetch loop, periodic deferrer).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import procrastinate

from _peers import lag
from _peers.idle import hourly_cron
from _peers.procrastinate_peer import CONCURRENCY

DISTRIBUTIONS = ("procrastinate", "psycopg", "psycopg-pool")
TASK = "bench_lag"
CRON_EVERY_SECOND = "* * * * * *"
POOL_SIZE = CONCURRENCY + 3
MODES = {
    "recurring": f'periodic(cron="{CRON_EVERY_SECOND}") per key',
    "oneoff": "configure(schedule_at=at).batch_defer_async, one call per second",
    "idle": 'periodic(cron="<m> * * * *") per key',
}
SETTINGS: dict[str, Any] = {
    "driver": "psycopg (PsycopgConnector)",
    "concurrency": CONCURRENCY,
    "pool_max_size": POOL_SIZE,
    "listen_notify": True,
    "fetch_job_polling_interval": "default (5 s)",
    "periodic": f"cron {CRON_EVERY_SECOND!r}, one periodic_id per key",
}
RECORDS_NEXT_DUE = False


def _app(
    dsn: str, pool_size: int, periodic: int = 0, cron: str = CRON_EVERY_SECOND
) -> tuple[procrastinate.App, Any]:
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=dsn, min_size=1, max_size=pool_size)
    )

    @app.task(name=TASK)
    async def fire(timestamp: int, key: str) -> None:
        started = time.time()
        lag.record(key, timestamp, started)

    for n in range(periodic):
        app.periodic(cron=cron, periodic_id=f"s{n}", task_kwargs={"key": f"s{n}"})(fire)
    return app, fire


async def install(dsn: str) -> None:
    """Create procrastinate's schema in the (new, empty) database."""
    app, _ = _app(dsn, 1)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def plan(dsn: str, mode: str, schedules: int, slots: Sequence[int]) -> None:
    """Defer the one-offs due at every second of ``slots`` (periodic tasks are code: nothing)."""
    if mode != "oneoff":
        return
    app, fire = _app(dsn, 1)
    async with app.open_async():
        for second in slots:
            deferrer = fire.configure(schedule_at=datetime.fromtimestamp(second, UTC))
            await deferrer.batch_defer_async(
                *({"key": f"s{n}", "timestamp": second} for n in range(schedules))
            )


async def work(dsn: str, mode: str, schedules: int, start: int) -> None:
    """Run one procrastinate worker (and its periodic deferrer) until killed."""
    periodic = 0 if mode == "oneoff" else schedules
    cron = CRON_EVERY_SECOND if mode == "recurring" else hourly_cron(start)
    app, _ = _app(dsn, POOL_SIZE, periodic, cron)
    async with app.open_async():
        await app.run_worker_async(
            concurrency=CONCURRENCY, wait=True, install_signal_handlers=False
        )
