"""Peer-neutral half of the idle benchmark: what a peer's worker costs while nothing is due.

``bench/_worker_idle.py`` measures it for ``oncely run``; this module measures the peers the
same way, with the figures both can give (pgqueuer and procrastinate cannot count their own
queries client-side as oncely's store does):

1. a new database ``bench_idle_<peer>_<pid>``; the peer installs its schema and stores
   ``schedules`` (100,000) hourly schedules (``mode="idle"`` of its schedules module), first
   due at ``start``: far enough ahead that none comes due while measured, and, for cron, no
   sooner than ``FIRST_DUE_S`` ahead so the previous hourly time lies more than 10 minutes back
   (procrastinate defers, at start, what it finds due that recently). The insert is timed; on
   PostgreSQL the tables are then vacuumed and analysed, as for oncely;
2. ``runs`` times on that database: one worker process is started (imports done before "go"),
   given ``settle`` seconds to start up and then, if it still works, more until it is quiet (at
   most ``QUIET_WAIT_S`` more; schedules registered in code are registered and expanded then,
   which takes pgqueuer and procrastinate a while for 100,000), and measured over ``seconds``
   from there (``startup_s`` says when): PostgreSQL transactions of its database (``xact_commit +
   xact_rollback`` in ``pg_stat_database``, read from another database; published up to ~10 s
   late) and its CPU (utime + stime, all threads), per minute. Handler runs are counted: any is
   a fault of the set-up.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from _peers import ScheduleModule, harness
from _peers.lag import cpu_seconds, read_records, sleep_until

#: The first hourly due time lies at least this far ahead of the insert, and at most
#: ``LAST_DUE_S``: cron hourly can place it no more than an hour ahead, and procrastinate
#: defers what was due in the last 10 minutes when its worker starts.
FIRST_DUE_S = 600
LAST_DUE_S = 2900
#: Seconds a run may take besides settling and measuring (start-up, stop).
RUN_EXTRA_S = 15
#: After ``settle``, the worker is quiet once it used under ``QUIET_CPU`` of a core over
#: ``QUIET_SPAN_S`` (or ``settle``, if shorter); it is waited for at most ``QUIET_WAIT_S``
#: (then measured anyway).
QUIET_CPU = 0.02
QUIET_SPAN_S = 10.0
QUIET_WAIT_S = 180.0


def hourly_cron(start: int) -> str:
    """Five-field cron firing hourly at the minute of ``start`` (UTC)."""
    return f"{datetime.fromtimestamp(start, UTC).minute} * * * *"


def _transactions(server: str, database: str) -> int:
    with harness.admin_connection(server) as connection:
        row = connection.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            [database],
        ).fetchone()
    return int(row[0]) if row else 0


def _snapshot(pid: int, server: str, database: str) -> tuple[float, float, int]:
    """Now, the CPU seconds process ``pid`` has used, and ``database``'s transactions."""
    return time.time(), cpu_seconds(pid), _transactions(server, database)


def _wait_until_quiet(name: str, procs: Any, logs: list[Path], span: float) -> None:
    """Wait until the worker used under ``QUIET_CPU`` of a core over ``span`` seconds."""
    deadline = time.time() + QUIET_WAIT_S
    used = cpu_seconds(procs[0].pid)
    while time.time() < deadline:
        sleep_until(time.time() + span, name, procs, logs)
        used, before = cpu_seconds(procs[0].pid), used
        if used - before < QUIET_CPU * span:
            return


def run_idle(
    name: str,
    peer: ScheduleModule,
    server: str,
    *,
    schedules: int,
    seconds: float,
    settle: float,
    runs: int,
) -> dict[str, Any]:
    """The idle figures of ``peer``: the insert, then one entry per run (see the docstring)."""
    measured = runs * (settle + QUIET_WAIT_S + seconds + RUN_EXTRA_S)
    ahead = FIRST_DUE_S + measured
    if ahead > LAST_DUE_S:
        raise ValueError(f"{runs} runs of {settle + seconds:g} s do not fit in an hour's cron")
    with harness.postgres_database(server, f"idle_{name}") as dsn:
        asyncio.run(peer.install(dsn))
        start = math.ceil(time.time() + ahead)
        started = time.perf_counter()
        asyncio.run(peer.plan(dsn, "idle", schedules, [start]))
        insert_s = time.perf_counter() - started
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("VACUUM ANALYZE")
        database = dsn.rsplit("/", 1)[1]
        results = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix=f"bench-idle-{name}-") as tmp:
                procs, records, logs = harness.start_workers(
                    name, dsn, 1, Path(tmp), ["idle", str(schedules), str(start)]
                )
                try:
                    t0 = harness.release_workers(name, procs, logs)
                    sleep_until(t0 + settle, name, procs, logs)
                    _wait_until_quiet(name, procs, logs, min(QUIET_SPAN_S, settle))
                    before = _snapshot(procs[0].pid, server, database)
                    sleep_until(before[0] + seconds, name, procs, logs)
                    after = _snapshot(procs[0].pid, server, database)
                finally:
                    harness.stop_workers(procs)
                ran = len(read_records(records))
            per_minute = 60 / (after[0] - before[0])
            cpu = (after[1] - before[1]) * per_minute
            results.append({
                "startup_s": round(before[0] - t0, 1),
                "window_s": round(after[0] - before[0], 1),
                "pg_transactions_per_min": round((after[2] - before[2]) * per_minute, 1),
                "cpu_s_per_min": round(cpu, 3),
                "core_percent": round(cpu / 60 * 100, 3),
                "ran": ran,
            })  # fmt: skip
        ahead_min = (start - time.time()) / 60
    return {
        "peer": name,
        "schedules": schedules,
        "insert_s": round(insert_s, 1),
        "next_due_min_ahead": round(ahead_min, 1),
        "runs": results,
    }
