"""The idle half of ``bench/worker.py``: what ``oncely run`` costs while nothing is due.

``count`` schedules of job ``idle`` (``rrule("FREQ=HOURLY")`` whose first occurrence is over an
hour away, so none comes due during the measurement) are saved one by one with ``app.schedule``,
the public API, and the time that took is reported. On PostgreSQL the tables are then vacuumed
and analysed, as autovacuum would do soon after such an insert, so that it does not do it inside
a window. Then, ``runs`` times on that same database, one worker process is started, left
``settle`` seconds to start up (migrations check, reconcile, first look for due work), and
measured over the next ``seconds`` seconds:

* CPU: the worker's utime + stime (all its threads) from ``/proc/<pid>/stat``, before and after
  (counted in clock ticks, 10 ms on Linux: a window with less than one reads 0);
* store queries: every named SQL block the worker's store looks up, which is one per statement
  it sends (the count ``bench/_idle.py`` takes), on both dialects;
* SQLite statements: every statement SQLite ran on the worker's connections (BEGIN and COMMIT
  included), through ``sqlite3.Connection.set_trace_callback``;
* PostgreSQL transactions: ``xact_commit + xact_rollback`` of the worker's database in
  ``pg_stat_database`` (pg_stat_statements is not loaded on the server, so statements are not
  counted server-side). PostgreSQL publishes a backend's counters up to ~10 s late, so a wake-up
  close to an edge of the window can land on either side of it.

This module is also the worker's app: ``_worker_idle:app`` is built on first access. With
``BENCH_WORKER_TRACE=<path>`` it first makes the store count: each named query looked up and
each SQLite statement run appends one line (``q <name>`` / ``s <first word>``) to ``<path>`` with
one ``write(2)``; the benchmark reads the lines written between its two snapshots.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

import oncely
from _peers import harness
from _peers.lag import cpu_seconds
from _worker_lag import Workers, sleep_until

#: Seconds the first occurrence lies beyond the end of the last window, at the least.
AHEAD_S = 3600


# --- the worker's app ----------------------------------------------------------------------------


def idle_app(url: str | None) -> tuple[oncely.App, oncely.Job]:
    """The app of the idle benchmark: one job, never due while it is measured."""
    app = oncely.App(url)

    @app.job()
    def idle(run: oncely.Run) -> None:
        raise AssertionError("nothing is due in this benchmark")

    return app, idle


class _CountingQueries(dict[str, str]):
    """A store's named SQL that appends ``q <name>`` to the trace for each lookup."""

    def __init__(self, queries: dict[str, str], trace: int) -> None:
        super().__init__(queries)
        self._trace = trace

    def __getitem__(self, name: str) -> str:
        os.write(self._trace, f"q {name}\n".encode())
        return super().__getitem__(name)


def _install_trace(path: str) -> None:
    """Count this process's store queries and SQLite statements into ``path`` (see above)."""
    from oncely.store import postgres as postgres_store
    from oncely.store import sqlite as sqlite_store

    trace = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def counting(original: Callable[[str], dict[str, str]]) -> Callable[[str], dict[str, str]]:
        return lambda dialect: _CountingQueries(original(dialect), trace)

    postgres_store.queries = counting(postgres_store.queries)  # type: ignore[attr-defined,assignment]
    sqlite_store.queries = counting(sqlite_store.queries)  # type: ignore[attr-defined,assignment]

    def statement(sql: str) -> None:
        words = [w for line in sql.splitlines() if not line.lstrip().startswith("--")
                 for w in line.split()]  # fmt: skip
        os.write(trace, f"s {words[0].upper() if words else '?'}\n".encode())

    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = connect(*args, **kwargs)
        connection.set_trace_callback(statement)
        return connection

    sqlite3.connect = traced_connect  # type: ignore[assignment]


def __getattr__(name: str) -> Any:
    """``app``, for ``oncely run _worker_idle:app``: built from the environment on first access."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if trace := os.environ.get("BENCH_WORKER_TRACE"):
        _install_trace(trace)
    app, _ = idle_app(None)
    globals()["app"] = app
    return app


# --- measurement ---------------------------------------------------------------------------------


def _transactions(server: str, database: str) -> int:
    """Transactions PostgreSQL has counted for ``database`` (read from another database)."""
    with psycopg.connect(harness.dsn_for(server, "postgres"), autocommit=True) as connection:
        row = connection.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            [database],
        ).fetchone()
    return int(row[0]) if row else 0


def _snapshot(trace: Path, pid: int, server: str, database: str | None) -> dict[str, Any]:
    return {
        "at": time.time(),
        "offset": trace.stat().st_size if trace.exists() else 0,
        "cpu": cpu_seconds(pid),
        "xacts": None if database is None else _transactions(server, database),
    }


def _insert(url: str, count: int, first: timedelta) -> float:
    """Save ``count`` idle schedules with ``app.schedule``; seconds it took."""
    app, idle = idle_app(url)
    app.migrate()
    trigger = oncely.rrule("FREQ=HOURLY", start=app.now() + first)
    started = time.perf_counter()
    for n in range(count):
        app.schedule(idle, trigger, key=f"idle:{n}")
    elapsed = time.perf_counter() - started
    app.close()
    return elapsed


def run_idle_cost(
    store: str,
    server: str,
    *,
    schedules: int,
    seconds: float,
    settle: float,
    runs: int,
    concurrency: int,
) -> dict[str, Any]:
    """The idle figures of ``store``: the insert, then one entry per run (see the docstring)."""
    measured = runs * (settle + seconds + 5)
    first = timedelta(seconds=AHEAD_S + measured)
    with harness.store_database(store, server, "worker_idle") as url:
        insert_s = _insert(url, schedules, first)
        inserted_at = time.time()
        database = None
        if store == "postgres":
            database = url.rsplit("/", 1)[1]
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute("VACUUM ANALYZE")
        results = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as tmp_name:
                tmp = Path(tmp_name)
                trace = tmp / "trace"
                team = Workers(
                    "_worker_idle", url, 1, tmp, concurrency=concurrency,
                    env={"BENCH_WORKER_TRACE": str(trace)},
                )  # fmt: skip
                try:
                    t0 = time.time()
                    sleep_until(t0 + settle, team)
                    before = _snapshot(trace, team.pids[0], server, database)
                    sleep_until(before["at"] + seconds, team)
                    after = _snapshot(trace, team.pids[0], server, database)
                    team.stop()
                finally:
                    team.kill()
                results.append(_figures(store, trace, before, after))
        ahead_min = (first.total_seconds() - (time.time() - inserted_at)) / 60
    return {
        "store": store,
        "schedules": schedules,
        "insert_s": round(insert_s, 1),
        "next_due_min_ahead": round(ahead_min, 1),
        "runs": results,
    }


def _figures(
    store: str, trace: Path, before: dict[str, Any], after: dict[str, Any]
) -> dict[str, Any]:
    with trace.open("rb") as fh:
        fh.seek(before["offset"])
        lines = fh.read(after["offset"] - before["offset"]).decode().splitlines()
    kinds = Counter(line.split(" ", 1)[0] for line in lines)
    named = Counter(line[2:] for line in lines if line.startswith("q "))
    per_minute = 60 / (after["at"] - before["at"])
    cpu_per_minute = (after["cpu"] - before["cpu"]) * per_minute
    xacts = None if after["xacts"] is None else (after["xacts"] - before["xacts"]) * per_minute
    return {
        "window_s": round(after["at"] - before["at"], 1),
        "store_queries_per_min": round(kinds["q"] * per_minute, 1),
        "sqlite_statements_per_min": (
            round(kinds["s"] * per_minute, 1) if store == "sqlite" else None
        ),
        "pg_transactions_per_min": None if xacts is None else round(xacts, 1),
        "cpu_s_per_min": round(cpu_per_minute, 3),
        "core_percent": round(cpu_per_minute / 60 * 100, 3),
        "queries": dict(sorted(named.items())),
    }
