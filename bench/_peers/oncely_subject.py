"""oncely itself, run through the same burst harness as the peers (on PostgreSQL or SQLite).

Each job is a deferred one-off (``app.defer``, the public API, one transaction per job) of a job
declared with ``overlap="allow"``: every occurrence is its own schedule, so overlap never applies,
and "allow" says so. Each worker process runs ``app.run_worker(concurrency=CONCURRENCY)``, the
worker ``oncely run`` starts (its sleeps, wake-ups, claims ahead and handler threads), with
oncely's default concurrency; the harness stops it with SIGTERM, which it answers by draining.
Everything else is default: at_least_once delivery, 5-minute leases, 5 attempts.

Until the worker existed this subject ticked in a loop (``app.tick()``, 5 ms sleep after an
empty tick); the commit that switched it gives the figures of both.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

# Imported before "ready", as the peers' libraries are: oncely imports its App, its worker and
# each store's driver on first use, which put 85 ms of imports inside the timed drain.
import oncely
import oncely.app
import oncely.store.postgres
import oncely.store.sqlite
import oncely.worker
from _peers import harness

DISTRIBUTIONS = ("oncely", "psycopg", "psycopg-pool")
#: Handlers at once per worker process: oncely's default (``oncely run --concurrency``).
CONCURRENCY = 8
SETTINGS: dict[str, Any] = {
    "enqueue": "app.defer per job (one transaction each)",
    "job": "overlap='allow', delivery at_least_once (default)",
    "worker": f"app.run_worker(concurrency={CONCURRENCY})",
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


def work(url: str) -> None:
    """Run oncely's worker until SIGTERM (then it drains and returns)."""
    app, _ = _app(url)
    app.run_worker(concurrency=CONCURRENCY)


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
