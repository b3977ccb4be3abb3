"""Peer-neutral half of the lag benchmark: workloads, worker processes, records, figures.

Lag is how late a scheduler starts what is due: handler start minus the time the run was due.
``bench/_worker_lag.py`` measures it for ``oncely run``; this module measures it the same way
for the peers (``bench/peer_worker.py``), and the figures of both come from ``figures`` here.

Two workloads (*modes*), each ``schedules`` keys (``s0``, ``s1``, ...) due at every whole second:

* ``recurring``: ``schedules`` schedules that fire every second, through the scheduler's own
  recurring feature, saved (or, where schedules live in code, registered in every worker) before
  the workers start;
* ``oneoff``: one-off jobs, ``schedules`` of them due at each whole second of the run, all
  enqueued before the workers start. Every scheduler can express this one.

One run of one peer and mode, on a new database ``bench_lag_<peer>_<pid>``:

1. the peer installs its schema and stores the workload (``plan``). For ``oneoff`` a pilot
   second (``schedules`` jobs due an hour after the run, which stay in the queue and never come
   due) is enqueued first and timed; from its pace the start ``base`` is chosen so that the rest
   is enqueued, and the workers have started, before it (``plan_oneoff``);
2. ``workers`` processes (``python -m _peers.worker PEER DSN RECORD MODE SCHEDULES START``)
   import, open their record file, say "ready", and are told "go" at ``t0``: at once for
   ``recurring`` (the start is then ``t0``), ``GO_AHEAD_S`` before ``base`` for ``oneoff`` (the
   start is ``base``; ``late_start_s`` says by how much the workers started after it, if they
   did);
3. every handler's first act is ``started = time.time()``; it then appends
   ``"<key> <due> <started>"`` to its process's own record file with one ``write(2)`` (O_APPEND);
4. the window is the whole seconds from ``margin`` after the start to ``margin`` before the end
   (``seconds`` after the start): start-up and shutdown stay out. At the end the workers get
   SIGTERM (the peers exit at once) and the records are read;
5. ``figures``: p50/p90/p99/max lag of the runs due in the window, how many ran, duplicates
   (a key and due time recorded more than once, over the whole run) and misses (a key and whole
   second of the window never recorded); the workers' CPU over the window, in cores.

Only the standard library and psycopg are used here, so both virtualenvs can import it.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from _peers import ScheduleModule, harness

MODES = ("recurring", "oneoff")
#: Seconds the pilot's jobs lie beyond the end of the run: they never come due while measured.
PILOT_AHEAD_S = 3600
#: Enqueueing the run is planned at this many times the pilot's pace, plus ``STARTUP_S`` for
#: the workers to import and say ready, so that both end before the first second is due.
LEAD_FACTOR = 1.5
STARTUP_S = 5.0
#: One-offs: the peers' workers are told "go" this long before the first second is due, so they
#: have connected and are waiting for it, as oncely's workers (started after enqueueing) are.
GO_AHEAD_S = 2.0

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

#: One recorded handler run: key, due (Unix seconds), started (Unix seconds).
Record = tuple[str, float, float]


# --- worker side -------------------------------------------------------------------------------


def record(key: str, due: float, started: float) -> None:
    """A lag handler's one write: run ``key`` due at ``due`` started at ``started``."""
    harness.write_record(f"{key} {due:.6f} {started:.6f}")


# --- shared with bench/_worker_lag.py ----------------------------------------------------------


def plan_oneoff(enqueue: Callable[[Sequence[int]], None], seconds: float) -> tuple[int, float]:
    """Enqueue a pilot second, then every second of the run; return ``(base, enqueue_s)``.

    ``enqueue(slots)`` stores the one-off jobs due at each whole second of ``slots``. ``base``
    is the run's first second; ``enqueue_s`` the time the run's own jobs took to enqueue.
    """
    pilot = [math.ceil(time.time() + seconds + PILOT_AHEAD_S)]
    started = time.perf_counter()
    enqueue(pilot)
    pilot_s = time.perf_counter() - started
    slots = math.ceil(seconds)
    base = math.ceil(time.time() + LEAD_FACTOR * pilot_s * slots + STARTUP_S)
    started = time.perf_counter()
    enqueue(range(base, base + slots))
    return base, time.perf_counter() - started


def window(t0: float, start: float, seconds: float, margin: float) -> tuple[int, int]:
    """The measured whole seconds ``[w0, w1)``: from ``margin`` after both the workers' go
    (``t0``) and the workload's ``start``, to ``margin`` before ``start + seconds``."""
    w0, w1 = math.ceil(max(t0, start) + margin), math.floor(start + seconds - margin)
    if w1 <= w0:
        raise ValueError(f"{seconds:g} s leave no window after 2 x {margin:g} s of margin")
    return w0, w1


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) process ``pid`` has used, from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    # fields[0] is the state (field 3 of proc(5)); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile of the sorted, non-empty ``ordered``."""
    return ordered[max(math.ceil(q / 100 * len(ordered)) - 1, 0)]


def read_records(paths: Iterable[Path]) -> list[Record]:
    """Every ``"<key> <due> <started>"`` line of the record files at ``paths``."""
    runs = []
    for path in paths:
        for line in path.read_text().splitlines():
            key, due, started = line.split()
            runs.append((key, float(due), float(started)))
    return runs


def figures(runs: Iterable[Record], schedules: int, w0: int, w1: int) -> dict[str, Any]:
    """Lag percentiles (ms) of the runs due in ``[w0, w1)``; duplicates and misses.

    The keys expected are ``s0..s<schedules-1>``, each due at every whole second of the window.
    A duplicated run counts once in the lags (its first record).
    """
    seen: Counter[tuple[str, float]] = Counter()
    lags: list[float] = []
    for key, due, started in runs:
        seen[(key, due)] += 1
        if w0 <= due < w1 and seen[(key, due)] == 1:
            lags.append((started - due) * 1000)
    lags.sort()
    expected = {(f"s{n}", float(t)) for n in range(schedules) for t in range(w0, w1)}
    quantiles: dict[str, float | None] = {
        name: round(percentile(lags, q), 1) if lags else None
        for name, q in (("p50_ms", 50), ("p90_ms", 90), ("p99_ms", 99), ("max_ms", 100))
    }
    return {
        "due": len(expected),
        "ran": len(lags),
        "runs_total": sum(seen.values()),
        **quantiles,
        "duplicates": sum(1 for count in seen.values() if count > 1),
        "misses": len(expected - seen.keys()),
    }


def median_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over ``runs`` of every numeric figure; duplicates and misses: the worst run."""
    merged: dict[str, Any] = {}
    for name, value in runs[0].items():
        if name in ("duplicates", "misses"):
            merged[name] = max(run[name] for run in runs)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            values = [run[name] for run in runs if run[name] is not None]
            merged[name] = statistics.median(values) if values else None
        elif name == "history":
            statuses = {status for run in runs for status in run["history"]}
            merged[name] = {
                s: statistics.median(run["history"].get(s, 0) for run in runs) for s in statuses
            }
        else:
            merged[name] = value
    return merged


# --- one run of a peer -------------------------------------------------------------------------


def chain_next_due(runs: Iterable[Record]) -> list[Record]:
    """Runs whose recorded due time is that of their key's *next* run, given their own.

    A key's runs are taken in start order: each one's due time is the one its predecessor
    recorded. The first run of each key has no predecessor; it is dropped (it falls in the
    start-up margin). Exact only where a key never runs twice at once (pgqueuer's schedules:
    a schedule row is picked again only after its run was booked).
    """
    by_key: defaultdict[str, list[Record]] = defaultdict(list)
    for run in runs:
        by_key[run[0]].append(run)
    chained = []
    for key, own in by_key.items():
        own.sort(key=lambda run: run[2])
        chained += [(key, before[1], run[2]) for before, run in pairwise(own)]
    return chained


def run_lag(
    name: str,
    peer: ScheduleModule,
    server: str,
    *,
    mode: str,
    schedules: int,
    seconds: float,
    workers: int,
    margin: float,
) -> dict[str, Any]:
    """One lag run of ``peer`` in ``mode`` on a new database; its figures (see the docstring)."""
    if mode not in peer.MODES:
        raise ValueError(f"{name} cannot express {mode!r}; it has {', '.join(peer.MODES)}")
    with (
        harness.postgres_database(server, f"lag_{name}") as dsn,
        tempfile.TemporaryDirectory(prefix=f"bench-lag-{name}-") as tmp,
    ):
        asyncio.run(peer.install(dsn))

        def enqueue(slots: Sequence[int]) -> None:
            asyncio.run(peer.plan(dsn, mode, schedules, slots))

        base: int | None = None
        if mode == "oneoff":
            base, enqueue_s = plan_oneoff(enqueue, seconds)
            first = base
        else:
            first = math.ceil(time.time())
            started = time.perf_counter()
            enqueue([first])
            enqueue_s = time.perf_counter() - started
        procs, records, logs = harness.start_workers(
            name, dsn, workers, Path(tmp), [mode, str(schedules), str(first)]
        )
        try:
            go = None if base is None else base - GO_AHEAD_S
            t0 = harness.release_workers(name, procs, logs, at=go)
            start = t0 if base is None else base
            w0, w1 = window(t0, start, seconds, margin)
            sleep_until(w0, name, procs, logs)
            cpu0 = sum(cpu_seconds(proc.pid) for proc in procs)
            sleep_until(w1, name, procs, logs)
            cpu1 = sum(cpu_seconds(proc.pid) for proc in procs)
            sleep_until(start + seconds, name, procs, logs)
        finally:
            harness.stop_workers(procs)
        runs = read_records(records)
    if mode == "recurring" and peer.RECORDS_NEXT_DUE:
        runs = chain_next_due(runs)
    result = figures(runs, schedules, w0, w1)
    result.update(
        peer=name, mode=mode, workers=workers, schedules=schedules, enqueue_s=round(enqueue_s, 2),
        late_start_s=round(max(t0 - start, 0.0), 3), window_s=w1 - w0,
        worker_cores=round((cpu1 - cpu0) / (w1 - w0), 3),
    )  # fmt: skip
    return result


def sleep_until(moment: float, name: str, procs: Any, logs: list[Path]) -> None:
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 1.0))
        harness.check_workers(name, procs, logs)
