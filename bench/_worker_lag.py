"""The lag half of ``bench/worker.py``: how late ``oncely run`` starts what is due.

One run on a new database, in one of two modes (the peers are measured the same way by
``bench/_peers/lag.py``, which also computes the figures of both):

* ``recurring``: ``schedules`` schedules of job ``tick``, each ``every(seconds=1)``, keyed
  ``s0..``, are saved with ``app.schedule`` before any worker starts;
* ``oneoff``: one-offs of job ``once``, ``schedules`` due at each whole second of the run
  (``app.defer(once, at=<second>, key="s<n>@<second>", payload="s<n>")``, one transaction each),
  are deferred before any worker starts; a timed pilot second, due an hour after the run, sets
  how far ahead the run starts (``_peers.lag.plan_oneoff``).

Then ``workers`` real worker processes (``python -m oncely.cli run _worker_lag:app``) run until
``seconds`` seconds after the start and are stopped with SIGTERM (each must drain and exit 0).
The handler's first act is ``time.time()``; it then appends ``"<key> <scheduled_for> <start>"``
to its process's own record file with one ``write(2)`` (O_APPEND, as ``bench/_peers/harness.py``
``record`` does); with ``handler="insert"`` it first INSERTs its key into table ``effects`` (see
`lag_app`). The figures come from those files:

* the measured window is the whole seconds from ``margin`` after the start (the workers' start;
  for ``oneoff`` the first second due, the workers having started before it) to ``margin``
  before they are stopped: start-up (imports, the first catch-up) and shutdown stay out;
* lag is ``start - scheduled_for`` of the occurrences due in the window;
* duplicates are (key, scheduled_for) pairs recorded more than once, over the whole run;
* misses are occurrences due in the window (every key, every whole second) never recorded;
* history is what ``app.history`` says about the window, counted by status;
* worker CPU is the workers' utime + stime over the window, in cores.

This module is also the workers' app: ``_worker_lag:app`` is built on first access from the
environment (``ONCELY_DATABASE_URL``; ``BENCH_WORKER_RECORDS``, the directory of the record
files). With ``BENCH_WORKER_PROFILE=<path>`` the worker's main thread (the loop) is profiled with
cProfile, and every statement its store sends is timed (wall time, by the name of its SQL block),
between two SIGUSR1 the benchmark sends at the edges of the window; both are written out at the
second one. The helpers every worker benchmark shares (databases,
worker processes, CPU time) live here too.
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg

import oncely
from _peers import harness
from _peers.lag import (
    cpu_seconds,
    figures,
    plan_oneoff,
    read_records,
    window,
)
from oncely.store.queries import DIALECTS, queries

BENCH_DIR = Path(__file__).resolve().parent
#: Connections of a worker process's pool for its handlers' INSERTs (``handler="insert"``), as
#: many as handlers run at once in ``bench/handlers.py``.
EFFECT_POOL = 10
HANDLERS = ("file", "insert")
#: Seconds a worker gets to drain and exit after SIGTERM before it is killed (and reported).
STOP_S = 40.0
#: The loop's steps whose time the profile reports: label, file, function.
PROFILED = (
    ("cycle (all the loop's work)", "worker/cycle.py", "turn"),
    ("  materialise (due_schedules, then one transaction per schedule)", "engine/tick.py",
     "_materialise"),
    ("  claim", "worker/cycle.py", "_claim"),
    ("  book outcomes", "worker/cycle.py", "book"),
    ("  next due time (sleep target)", "worker/cycle.py", "next_due"),
    ("  housekeeping", "worker/housekeeping.py", "maybe_sweep"),
    ("  start handler threads", "worker/pool.py", "dispatch"),
    ("asleep (waiting for a wake-up)", "worker/wakeups.py", "wait"),
    ("heartbeats (their own thread: one statement per beat)", "worker/leases.py", "beat"),
)  # fmt: skip


# --- shared by the worker benchmarks -------------------------------------------------------------


class WorkerFailed(RuntimeError):
    """A worker process exited early or not with 0; the message carries its stderr's tail."""


class Workers:
    """``count`` processes of ``python -m oncely.cli run MODULE:app``, started side by side.

    ``env`` is added to each process's environment; ``per_worker[k]`` to process ``k``'s only
    (the list may be shorter than ``count``). Stderr goes to ``<tmp>/worker<k>.stderr``.
    """

    def __init__(
        self,
        module: str,
        url: str,
        count: int,
        tmp: Path,
        *,
        concurrency: int,
        env: Mapping[str, str] | None = None,
        per_worker: list[Mapping[str, str]] | None = None,
    ) -> None:
        base = dict(os.environ)
        base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH_DIR), base.get("PYTHONPATH")]))
        base["ONCELY_DATABASE_URL"] = url
        base.update(env or {})
        self.command = [
            sys.executable, "-m", "oncely.cli", "run", f"{module}:app",
            "--concurrency", str(concurrency),
        ]  # fmt: skip
        self.logs = [tmp / f"worker{k}.stderr" for k in range(count)]
        self.procs: list[subprocess.Popen[bytes]] = []
        extra = list(per_worker or [])
        for k, log in enumerate(self.logs):
            own = {**base, **(extra[k] if k < len(extra) else {})}
            with log.open("wb") as err:
                quiet = subprocess.DEVNULL
                self.procs.append(
                    subprocess.Popen(
                        self.command, cwd=tmp, env=own, stdin=quiet, stdout=quiet, stderr=err
                    )
                )

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def check_alive(self) -> None:
        """Raise `WorkerFailed` if a worker has exited."""
        for proc, log in zip(self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                raise WorkerFailed(
                    f"worker {proc.pid} exited with {proc.returncode}:\n{_tail(log)}"
                )

    def signal(self, k: int, signum: int) -> None:
        self.procs[k].send_signal(signum)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until every worker logged that it is serving. The window starts after that: on
        a loaded machine start-up took longer than the margin, and every occurrence in the
        window was (rightly) skipped as missed when the worker met them late."""
        deadline = time.monotonic() + timeout
        while not all(b" serving " in log.read_bytes() for log in self.logs):
            self.check_alive()
            if time.monotonic() > deadline:
                raise WorkerFailed(f"the workers did not start within {timeout:.0f} s")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM every worker; each must drain and exit 0 within ``STOP_S``."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        failed = []
        for proc, log in zip(self.procs, self.logs, strict=True):
            try:
                proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.returncode != 0:
                failed.append(f"worker {proc.pid} exited with {proc.returncode}:\n{_tail(log)}")
        if failed:
            raise WorkerFailed("\n".join(failed))

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no stderr)"


def sleep_until(moment: float, workers: Workers) -> None:
    """Sleep until ``time.time()`` reaches ``moment``, checking the workers every second."""
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 1.0))
        workers.check_alive()


# --- the workers' app ----------------------------------------------------------------------------


def lag_app(
    url: str | None, record: str | None, effects: str | None = None
) -> tuple[oncely.App, oncely.Job]:
    """The app of the lag benchmark; its handler appends to ``record`` (None: never runs).

    With ``effects`` (a PostgreSQL conninfo), job ``tick``'s handler also does what the
    commonest real job does, as ``bench/handlers.py``'s does: one autocommit ``INSERT`` of its
    key into table ``effects`` through a connection of its process's pool of `EFFECT_POOL`.
    """
    app = oncely.App(url)
    fd = None if record is None else os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    pool = None
    if effects is not None and record is not None:
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(
            effects, min_size=EFFECT_POOL, max_size=EFFECT_POOL, kwargs={"autocommit": True}
        )

    @app.job()
    def tick(run: oncely.Run) -> None:
        started = time.time()
        if fd is None:
            raise AssertionError("the benchmark's own app schedules; only workers run")
        if pool is not None:
            with pool.connection() as connection:
                connection.execute("INSERT INTO effects (key) VALUES (%s)", (run.key,))
        line = f"{run.key} {run.scheduled_for.timestamp():.6f} {started:.6f}\n"
        os.write(fd, line.encode())

    @app.job()
    def once(run: oncely.Run) -> None:
        started = time.time()
        if fd is None:
            raise AssertionError("the benchmark's own app defers; only workers run")
        line = f"{run.payload} {run.scheduled_for.timestamp():.6f} {started:.6f}\n"
        os.write(fd, line.encode())

    return app, tick


class _StatementClock:
    """Wall time of every statement the store sends, by the name of its SQL block, when on.

    Times the calls of any thread (handlers' included); ``BEGIN``, ``COMMIT`` and other unnamed
    statements are filed under their first word.
    """

    def __init__(self) -> None:
        self.on = False
        self._lock = threading.Lock()
        self._names = {sql: name for d in DIALECTS for name, sql in queries(d).items()}
        self.seen: dict[str, list[float]] = {}  # name -> [calls, total s, max s]

    def name(self, query: object) -> str:
        text = query if isinstance(query, str) else str(query)
        found = self._names.get(text)
        return found if found is not None else (text.split() or ["?"])[0].upper()

    def timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def run(target: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.on:
                return method(target, query, *args, **kwargs)
            started = time.perf_counter()
            try:
                return method(target, query, *args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                with self._lock:
                    entry = self.seen.setdefault(self.name(query), [0, 0.0, 0.0])
                    entry[0] += 1
                    entry[1] += elapsed
                    entry[2] = max(entry[2], elapsed)

        return run

    def install(self) -> None:
        psycopg.Connection.execute = self.timed(psycopg.Connection.execute)  # type: ignore[method-assign]
        psycopg.Cursor.executemany = self.timed(psycopg.Cursor.executemany)  # type: ignore[method-assign]
        clock = self

        class TimedConnection(sqlite3.Connection):
            execute = clock.timed(sqlite3.Connection.execute)
            executemany = clock.timed(sqlite3.Connection.executemany)

        connect = sqlite3.connect

        def timed_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            return connect(*args, factory=TimedConnection, **kwargs)

        sqlite3.connect = timed_connect  # type: ignore[assignment]


def _install_profile(path: str) -> None:
    """Between two SIGUSR1: profile this (main) thread and time every statement; then write
    the profile to ``path`` and the statement times to ``<path>.statements.json``."""
    profiler = cProfile.Profile()
    statements = _StatementClock()
    statements.install()
    signals = 0

    def toggle(signum: int, frame: FrameType | None) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            statements.on = True
            profiler.enable()
        elif signals == 2:
            profiler.disable()
            statements.on = False
            profiler.dump_stats(path)
            Path(f"{path}.statements.json").write_text(json.dumps(statements.seen))

    signal.signal(signal.SIGUSR1, toggle)


def __getattr__(name: str) -> Any:
    """``app``, for ``oncely run _worker_lag:app``: built from the environment on first access."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    record = Path(os.environ["BENCH_WORKER_RECORDS"]) / f"{os.getpid()}.records"
    if profile := os.environ.get("BENCH_WORKER_PROFILE"):
        _install_profile(profile)
    app, _ = lag_app(None, str(record), os.environ.get("BENCH_WORKER_EFFECTS"))
    globals()["app"] = app
    return app


# --- one run -------------------------------------------------------------------------------------


def run_lag(
    store: str,
    server: str,
    *,
    schedules: int,
    seconds: float,
    workers: int,
    concurrency: int,
    margin: float,
    mode: str = "recurring",
    profile: bool = False,
    handler: str = "file",
) -> dict[str, Any]:
    """One lag run on a new database of ``store``; its figures (see the module docstring).

    With ``profile``, worker 0's loop is profiled over the window and ``"profile"`` holds the
    seconds per window second spent in each step of ``PROFILED`` and the top functions. With
    ``handler="insert"`` (PostgreSQL only), each handler also INSERTs its key into table
    ``effects`` of the run's database (see `lag_app`).
    """
    if handler == "insert" and store != "postgres":
        raise ValueError("handler='insert' writes to PostgreSQL: run it with store='postgres'")
    with (
        harness.store_database(store, server, "worker_lag") as url,
        tempfile.TemporaryDirectory() as tmp_name,
    ):
        tmp = Path(tmp_name)
        env = {"BENCH_WORKER_RECORDS": str(tmp / "records")}
        if handler == "insert":
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute("CREATE TABLE effects (key text NOT NULL)")
            env["BENCH_WORKER_EFFECTS"] = url
        app, tick = lag_app(url, None)
        base: int | None = None
        if mode == "oneoff":

            def defer(slots: Sequence[int]) -> None:
                for second in slots:
                    at = datetime.fromtimestamp(second, UTC)
                    for n in range(schedules):
                        app.defer("once", at=at, key=f"s{n}@{second}", payload=f"s{n}")

            base, schedule_s = plan_oneoff(defer, seconds)
        else:
            started = time.perf_counter()
            every = oncely.every(seconds=1)
            for n in range(schedules):
                app.schedule(tick, every, key=f"s{n}")
            schedule_s = time.perf_counter() - started
        app.close()

        records = tmp / "records"
        records.mkdir()
        stats = tmp / "worker0.pstats"
        team = Workers(
            "_worker_lag", url, workers, tmp, concurrency=concurrency, env=env,
            per_worker=[{"BENCH_WORKER_PROFILE": str(stats)}] if profile else None,
        )  # fmt: skip
        try:
            team.wait_ready()
            t0 = time.time()
            start = t0 if base is None else base
            w0, w1 = window(t0, start, seconds, margin)
            sleep_until(w0, team)
            cpu0 = sum(cpu_seconds(pid) for pid in team.pids)
            if profile:
                team.signal(0, signal.SIGUSR1)
            sleep_until(w1, team)
            cpu1 = sum(cpu_seconds(pid) for pid in team.pids)
            if profile:
                team.signal(0, signal.SIGUSR1)
            sleep_until(start + seconds, team)
            team.stop()
        finally:
            team.kill()

        result = figures(read_records(records.glob("*.records")), schedules, w0, w1)
        if handler == "insert":
            with psycopg.connect(url) as connection:
                row = connection.execute("SELECT count(*) FROM effects").fetchone()
            result["effects"] = row[0] if row else 0
        result.update(
            store=store, mode=mode, handler=handler, workers=workers, schedules=schedules,
            schedule_s=round(schedule_s, 2), late_start_s=round(max(t0 - start, 0.0), 3),
            window_s=w1 - w0, worker_cores=round((cpu1 - cpu0) / (w1 - w0), 3),
            history=_history(url, w0, w1, schedules),
        )  # fmt: skip
        if profile:
            result["profile"] = profile_summary(stats, w1 - w0)
        return result


def _history(url: str, w0: int, w1: int, schedules: int) -> dict[str, int]:
    """Occurrences due in the window by status, as ``app.history`` reports them."""
    app, _ = lag_app(url, None)
    since, until = datetime.fromtimestamp(w0, UTC), datetime.fromtimestamp(w1, UTC)
    limit = schedules * (w1 - w0) * 2 + 1
    try:
        rows = app.history(since=since, until=until, limit=limit)
    finally:
        app.close()
    return dict(Counter(row.status for row in rows))


def profile_summary(path: Path, window_s: int) -> dict[str, Any]:
    """Seconds per window second in each step of ``PROFILED``, and the top functions by own time."""
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = pstats.Stats(
        str(path)
    ).stats  # type: ignore[attr-defined]
    steps = {}
    for label, suffix, function in PROFILED:
        calls, cumulative = 0, 0.0
        for (filename, _, name), (_, ncalls, _, ct, _) in raw.items():
            if name == function and filename.endswith(suffix):
                calls += ncalls
                cumulative += ct
        steps[label] = {"calls": calls, "s_per_s": round(cumulative / window_s, 3)}
    own = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:8]
    top = [
        {
            "function": f"{Path(filename).name}:{line}({name})",
            "calls": ncalls,
            "own_s_per_s": round(tt / window_s, 3),
        }
        for (filename, line, name), (_, ncalls, tt, _, _) in own
    ]
    timed = json.loads(Path(f"{path}.statements.json").read_text())
    slowest = sorted(timed.items(), key=lambda item: item[1][1], reverse=True)[:8]
    statements = [
        {
            "statement": name,
            "calls": calls,
            "s_per_s": round(total / window_s, 3),
            "mean_ms": round(total / calls * 1000, 2),
            "max_ms": round(longest * 1000, 1),
        }
        for name, (calls, total, longest) in slowest
    ]
    return {"steps": steps, "top": top, "statements": statements}
