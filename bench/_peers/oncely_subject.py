"""oncely itself, run through the same burst harness as the peers (on PostgreSQL or SQLite).

Each job is a deferred one-off (``app.defer``, the public API, one transaction per job) of a job
declared with ``overlap="allow"``: every occurrence is its own schedule, so overlap never applies,
and "allow" says so. Workers are ``app.tick()`` in a loop, sleeping 5 ms when a tick ran nothing
(the worker process with its wake-ups is not built yet; a tick claims in adaptive batches of up
to 256 and books successes per batch). Everything else is default: at_least_once delivery,
5-minute leases, 5 attempts.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

import oncely
from _peers import harness

DISTRIBUTIONS = ("oncely", "psycopg", "psycopg-pool")
SETTINGS: dict[str, Any] = {
    "enqueue": "app.defer per job (one transaction each)",
    "job": "overlap='allow', delivery at_least_once (default)",
    "worker": "app.tick() in a loop; 5 ms sleep after an empty tick",
}
UNFINISHED = (
    "SELECT count(*) FROM oncely_occurrences WHERE status IN ('pending', 'running', 'retrying')"
)


def _app(url: str) -> tuple[oncely.App, oncely.Job]:
    app = oncely.App(url)

    @app.job(overlap="allow")
    def burst(run: oncely.Run) -> None:
        harness.record(run.payload)

    return app, burst


async def install(url: str) -> None:
    """Create oncely's schema (its migrations) in the new, empty database."""
    app, _ = _app(url)
    app.migrate()
    app.close()


async def enqueue(url: str, jobs: int) -> None:
    """Defer jobs ``0..jobs-1``, all due now."""
    app, burst = _app(url)
    due = datetime.now(UTC) - timedelta(seconds=1)
    for n in range(jobs):
        app.defer(burst, at=due, key=f"burst:{n}", payload=n)
    app.close()


async def work(url: str) -> None:
    """Tick until the process is killed."""
    app, _ = _app(url)
    while True:
        if not app.tick().ran:
            time.sleep(0.005)


def unfinished(url: str) -> int:
    """Occurrences not yet finished, read with the dialect's own driver."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url[len("sqlite:///") :]) as connection:
            (count,) = connection.execute(UNFINISHED).fetchone()
        connection.close()
        return int(count)
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute(UNFINISHED).fetchone()
    return int(row[0]) if row else -1
