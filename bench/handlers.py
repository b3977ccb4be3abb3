"""Fast with real handlers: a burst whose handler writes to PostgreSQL, beside the peers and the
bare loop of the same writes, in one run, on the same server.

The workload: ``--jobs`` (20,000) one-offs due now, each drained once. The handler of every job
does what the commonest real job does: one autocommit ``INSERT`` of the job's key into the
table ``effects`` through a connection it owns, taken from a pool of ``HANDLERS`` (10)
psycopg connections per worker process (``psycopg_pool``; async peers ``AsyncConnectionPool``),
so at most 10 handlers write at once in each process. Subjects:

* ``oncely``: `App.defer_many` into the template, ``app.run_worker(concurrency=10)``, the job
  ``overlap="allow"``, at_least_once: the effect commits on the handler's connection and the
  booking on oncely's own;
* ``oncely-transactional``: the same job ``delivery="transactional"``, its INSERT through
  ``run.connection``: the effect and the booking commit together (no pool of its own);
* ``pgqueuer``: ``QueueManager.run(batch_size=250)`` as ``bench/_peers/pgqueuer_peer.py``;
* ``procrastinate``: ``run_worker_async(concurrency=10)`` as
  ``bench/_peers/procrastinate_peer.py``, on at most its ``BURST_JOBS`` (4,000) jobs, with at
  most 2 workers (``MAX_WORKERS``);
* ``bare``: no scheduler: 10 threads per process, each with its own connection, INSERT the keys
  one after the other: the limit of this workload on this machine and server.

Then the lag with this handler (``--lag-seconds``, 30; 0 for none): ``bench/worker.py``'s
recurring lag on PostgreSQL, 1,000 schedules every second run by 2 worker processes of 10
handlers each, every handler also INSERTing its key through its process's pool of 10
(``--handler insert``), ``--runs`` runs of that many seconds each; the target is a p99 under 50 ms.

``--workers 1,2`` (the default; ``1,2,4,8`` for scale-out) runs each subject with that many
worker processes on one database; above ``MAX_HANDLER_CONNECTIONS`` (64) handler connections in
all, each process gets fewer than 10 (the server allows 100 connections, shared). Each run
drains a copy of a template database enqueued once per subject (``harness.enqueued``). Timed:
from "go" to the last first INSERT of a key (the database's clock). Counted per run:
duplicates (keys inserted more than once, after the scheduler's tables show every job finished),
misses (keys never inserted), commits of the database (``pg_stat_database.xact_commit``, the
harness's own polls taken out) and WAL flushes of the server (``pg_stat_wal.wal_sync``, the
whole server: other databases' work shows in it) per job, and the largest peak RSS of a worker
process (``VmHWM``). Medians of ``--runs`` (5); duplicates and misses the worst run.

The peers run in ``.venv-bench``: this script runs itself there with ``--peer NAME``. Run from
the project root::

    .venv/bin/python bench/handlers.py --runs 5 --write docs/performance.md
    .venv/bin/python bench/handlers.py --runs 3 --workers 1,2,4,8 --subjects oncely pgqueuer bare
    .venv/bin/python bench/handlers.py --runs 1 --jobs 500 --no-peers        # smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

_BENCH_DIR = Path(__file__).resolve().parent
if str(_BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(_BENCH_DIR))

import psycopg  # noqa: E402

from _peers import harness  # noqa: E402

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432"
PEERS_PYTHON = _BENCH_DIR.parent / ".venv-bench" / "bin" / "python"
ONCELY_SUBJECTS = ("oncely", "oncely-transactional")
PEER_SUBJECTS = ("pgqueuer", "procrastinate")
SUBJECTS = (*ONCELY_SUBJECTS, *PEER_SUBJECTS, "bare")
HANDLERS = 10
MAX_HANDLER_CONNECTIONS = 64
POLL_S = 0.05
#: Worker processes a subject is measured with at most: procrastinate's pools (its own and the
#: handlers') took more connections than the server's 100 at 8 workers, and it drains slowly.
MAX_WORKERS = {"procrastinate": 2}
#: Lag with this handler (`measure_lag`): as bench/worker.py measures it on PostgreSQL.
LAG_SCHEDULES = 1_000
LAG_WORKERS = 2
LAG_MARGIN_S = 5.0
#: The issue's target for the p99 of that lag.
LAG_P99_TARGET_MS = 50
CREATE_EFFECTS = (
    "CREATE TABLE effects "
    "(key text NOT NULL, done_at timestamptz NOT NULL DEFAULT clock_timestamp())"
)
INSERT_EFFECT = "INSERT INTO effects (key) VALUES (%s)"
#: Keys of the jobs; each subject's handler inserts its job's.
KEY = "job-{}"


def handlers_per_process(workers: int) -> int:
    """Handlers (and handler connections) of each of ``workers`` processes."""
    return max(1, min(HANDLERS, MAX_HANDLER_CONNECTIONS // workers))


# --- worker processes (python bench/handlers.py --work SUBJECT DSN INDEX WORKERS) ---------------


def _oncely_app(dsn: str, delivery: str, handlers: int) -> Any:
    from psycopg_pool import ConnectionPool

    import oncely

    app = oncely.App(dsn)
    if delivery == "transactional":

        @app.job(overlap="allow", delivery="transactional")
        def effect(run: oncely.Run) -> None:
            run.connection.execute(INSERT_EFFECT, (run.key,))

        return app, None
    pool = ConnectionPool(
        dsn, min_size=handlers, max_size=handlers, kwargs={"autocommit": True}, open=False
    )

    @app.job(overlap="allow")
    def effect(run: oncely.Run) -> None:
        with pool.connection() as connection:
            connection.execute(INSERT_EFFECT, (run.key,))

    return app, pool


def _work_oncely(dsn: str, delivery: str, handlers: int) -> None:
    app, pool = _oncely_app(dsn, delivery, handlers)
    if pool is not None:
        pool.open(wait=True)
    app.run_worker(concurrency=handlers)


async def _work_pgqueuer(dsn: str, handlers: int) -> None:
    import asyncpg
    from pgqueuer import AsyncpgDriver, QueueManager
    from pgqueuer.models import Job
    from pgqueuer.queries import Queries
    from psycopg_pool import AsyncConnectionPool

    from _peers import pgqueuer_peer

    pool = AsyncConnectionPool(
        dsn, min_size=handlers, max_size=handlers, kwargs={"autocommit": True}, open=False
    )
    await pool.open(wait=True)
    qm = QueueManager(Queries(AsyncpgDriver(await asyncpg.connect(dsn))))

    @qm.entrypoint(pgqueuer_peer.ENTRYPOINT)
    async def effect(job: Job) -> None:
        assert job.payload is not None
        async with pool.connection() as connection:
            await connection.execute(INSERT_EFFECT, (KEY.format(job.payload.decode()),))

    await qm.run(batch_size=pgqueuer_peer.BATCH_SIZE)


async def _work_procrastinate(dsn: str, handlers: int) -> None:
    import procrastinate
    from psycopg_pool import AsyncConnectionPool

    from _peers import procrastinate_peer

    pool = AsyncConnectionPool(
        dsn, min_size=handlers, max_size=handlers, kwargs={"autocommit": True}, open=False
    )
    await pool.open(wait=True)
    connector = procrastinate.PsycopgConnector(conninfo=dsn, min_size=1, max_size=handlers + 2)
    app = procrastinate.App(connector=connector)

    @app.task(name=procrastinate_peer.TASK)
    async def effect(n: int) -> None:
        async with pool.connection() as connection:
            await connection.execute(INSERT_EFFECT, (KEY.format(n),))

    async with app.open_async():
        await app.run_worker_async(concurrency=handlers, wait=True, install_signal_handlers=False)


def _work_bare(dsn: str, index: int, workers: int, jobs: int, handlers: int) -> None:
    keys = iter(range(index, jobs, workers))
    lock = threading.Lock()
    # Open until SIGTERM, as the schedulers' connections: their backends' CPU is counted then.
    connections = [psycopg.connect(dsn, autocommit=True) for _ in range(handlers)]

    def insert_all(connection: psycopg.Connection[Any]) -> None:
        while True:
            with lock:
                n = next(keys, None)
            if n is None:
                return
            connection.execute(INSERT_EFFECT, (KEY.format(n),))

    threads = [threading.Thread(target=insert_all, args=(c,)) for c in connections]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    threading.Event().wait()  # stopped, like every worker, by SIGTERM


def _profile_threads() -> list[tuple[str, cProfile.Profile]]:
    """Profile the calling thread and every thread started after, each on its own profiler."""
    profiles: list[tuple[str, cProfile.Profile]] = []
    unprofiled = threading.Thread.run

    def run(thread: threading.Thread) -> None:
        profile = cProfile.Profile()
        profiles.append((thread.name, profile))
        profile.enable()
        try:
            unprofiled(thread)
        finally:
            profile.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    main = cProfile.Profile()
    profiles.append(("loop", main))
    main.enable()
    return profiles


def _dump_profiles(profiles: list[tuple[str, cProfile.Profile]], directory: Path) -> None:
    """One pstats file per thread name in ``directory`` (threads of a name merged)."""
    by_name: dict[str, pstats.Stats] = {}
    for name, profile in profiles:
        profile.disable()
        name = name.split("-")[0] if name.startswith("Thread-") else name
        if name in by_name:
            by_name[name].add(profile)
        else:
            by_name[name] = pstats.Stats(profile)
    for name, stats in by_name.items():
        stats.dump_stats(directory / f"{name}.pstats")


def work(subject: str, dsn: str, index: int, workers: int, jobs: int) -> None:
    """One worker process: import, say "ready", wait for "go", run until SIGTERM.

    With ``$BENCH_PROFILE`` (a directory), worker 0 runs every thread under cProfile and writes
    one ``pstats`` file per thread name there when it stops.
    """
    handlers = handlers_per_process(workers)
    profile_to = os.environ.get("BENCH_PROFILE") if index == 0 else None
    profiles = _profile_threads() if profile_to else []
    if subject in ONCELY_SUBJECTS:
        import oncely  # noqa: F401 (imported before "go", as the peers' libraries)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    if sys.stdin.readline().strip() != "go":
        return
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if subject in ONCELY_SUBJECTS:
        _work_oncely(dsn, subject.removeprefix("oncely-"), handlers)
    elif subject == "pgqueuer":
        asyncio.run(_work_pgqueuer(dsn, handlers))
    elif subject == "procrastinate":
        asyncio.run(_work_procrastinate(dsn, handlers))
    else:
        _work_bare(dsn, index, workers, jobs, handlers)
    if profile_to:
        _dump_profiles(profiles, Path(profile_to))


# --- the templates: schema, the effects table and every job, enqueued once per subject ---------


def _create_effects(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(CREATE_EFFECTS)


def subject_jobs(subject: str, jobs: int) -> int:
    if subject == "procrastinate":
        from _peers import procrastinate_peer

        return min(jobs, procrastinate_peer.BURST_JOBS)
    return jobs


def _template_module(subject: str) -> Any:
    """What ``harness.enqueued`` needs for ``subject``: ``install`` and ``enqueue``."""
    if subject in PEER_SUBJECTS:
        from _peers import load

        peer = load(subject)

        async def install(dsn: str) -> None:
            await peer.install(dsn)
            _create_effects(dsn)

        return SimpleNamespace(install=install, enqueue=peer.enqueue)

    async def install_bare(dsn: str) -> None:
        _create_effects(dsn)

    async def enqueue_nothing(dsn: str, jobs: int) -> None:
        pass

    if subject == "bare":
        return SimpleNamespace(install=install_bare, enqueue=enqueue_nothing)

    async def install_oncely(dsn: str) -> None:
        app, _ = _oncely_app(dsn, subject.removeprefix("oncely-"), 1)
        app.migrate()
        app.close()
        _create_effects(dsn)

    async def enqueue_oncely(dsn: str, jobs: int) -> None:
        app, _ = _oncely_app(dsn, subject.removeprefix("oncely-"), 1)
        due = datetime.now(UTC)
        app.defer_many("effect", [{"at": due, "key": KEY.format(n)} for n in range(jobs)])
        app.close()

    return SimpleNamespace(install=install_oncely, enqueue=enqueue_oncely)


_UNFINISHED_ONCELY = (
    "SELECT count(*) FROM oncely_occurrences WHERE status IN ('pending', 'running', 'retrying')"
)
#: Jobs the scheduler's own tables still hold as not finished.
UNFINISHED = {
    "oncely": _UNFINISHED_ONCELY,
    "oncely-transactional": _UNFINISHED_ONCELY,
    "pgqueuer": "SELECT count(*) FROM pgqueuer",
    "procrastinate": "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')",
}


# --- one run -----------------------------------------------------------------------------------


def _database_counters(dsn: str) -> dict[str, int]:
    """Commits of this database, WAL syncs and writes of the server, the WAL position.

    Read on a connection of its own: a backend reports its counts when it goes idle for a
    while or exits, so they are read once every other connection of the run has closed.
    """
    with psycopg.connect(dsn, autocommit=True) as connection:
        row = connection.execute(
            "SELECT d.xact_commit, w.wal_sync, w.wal_write, "
            "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint "
            "FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()"
        ).fetchone()
    assert row is not None
    commits, syncs, writes, lsn = row
    return {"commits": commits, "wal_syncs": syncs, "wal_writes": writes, "wal_bytes": lsn}


def _wait_for_backends_to_exit(dsn: str, wait_s: float = 5.0) -> int:
    """Wait until no other connection is left on the database; return the looks it took (each
    one commit). A backend reports its counts as it exits, and a read just after its worker
    stopped came out short (0.96 commits per job for the bare loop: one each)."""
    deadline, looks = time.monotonic() + wait_s, 0
    with psycopg.connect(dsn, autocommit=True) as connection:
        while time.monotonic() < deadline:
            looks += 1
            row = connection.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
            if row == (0,):
                break
            time.sleep(POLL_S)
    return looks


def _cpu_s(pid: int) -> float:
    """CPU seconds process ``pid`` has used (user and system, all its threads); 0 if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _start(
    subject: str, dsn: str, workers: int, jobs: int, tmp: Path, profile: Path | None
) -> tuple[list[Any], list[Path]]:
    env = dict(os.environ)
    if profile is not None:
        env["BENCH_PROFILE"] = str(profile / f"{subject}-{workers}")
        Path(env["BENCH_PROFILE"]).mkdir(parents=True, exist_ok=True)
    procs, logs = [], []
    for index in range(workers):
        logs.append(tmp / f"worker{index}.stderr")
        command = [sys.executable, __file__, "--work", subject, dsn, str(index), str(workers),
                   str(jobs)]  # fmt: skip
        with logs[-1].open("w") as err:
            procs.append(
                subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    env=env,
                )
            )
    return procs, logs


def run_once(
    subject: str,
    server: str,
    template: Any,
    workers: int,
    timeout: float,
    profile: Path | None = None,
) -> dict[str, Any]:
    """Drain a copy of ``template`` with ``workers`` processes of ``subject``; its figures."""
    jobs = template.jobs
    with harness.postgres_database(server, f"handlers_{subject}", template.database) as dsn:
        with tempfile.TemporaryDirectory(prefix="bench-handlers-") as tmp:
            procs, logs = _start(subject, dsn, workers, jobs, Path(tmp), profile)
            polls = 0
            before = _database_counters(dsn)
            try:
                with psycopg.connect(dsn, autocommit=True) as watch:
                    t0 = harness.release_workers(subject, procs, logs)
                    deadline = t0 + timeout
                    done = 0
                    while done < jobs and time.time() < deadline:
                        time.sleep(POLL_S)
                        polls += 1
                        row = watch.execute("SELECT count(*) FROM effects").fetchone()
                        done = row[0] if row else 0
                        harness.check_workers(subject, procs, logs)
                    if subject in UNFINISHED and done >= jobs:
                        while time.time() < deadline + 30:
                            polls += 1
                            if watch.execute(UNFINISHED[subject]).fetchone() == (0,):
                                break
                            time.sleep(POLL_S)
                    time.sleep(harness.GRACE_S)
                    backends = watch.execute(
                        "SELECT pid FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    ).fetchall()
                rss = max(_peak_rss_mb(proc.pid) for proc in procs)
                worker_cpu = sum(_cpu_s(proc.pid) for proc in procs)
                server_cpu = sum(_cpu_s(pid) for (pid,) in backends)
            finally:
                harness.stop_workers(procs)
        polls += _wait_for_backends_to_exit(dsn)
        after = _database_counters(dsn)
        with psycopg.connect(dsn, autocommit=True) as connection:
            drained = connection.execute(
                "SELECT extract(epoch FROM max(first)) FROM "
                "(SELECT min(done_at) AS first FROM effects GROUP BY key) AS keys"
            ).fetchone()
            keys = connection.execute("SELECT key, count(*) FROM effects GROUP BY key").fetchall()
    inserted = dict(keys)
    missing = sum(1 for n in range(jobs) if KEY.format(n) not in inserted)
    duplicates = sum(1 for n in inserted.values() if n > 1)
    drain_s = float(drained[0]) - t0 if missing == 0 and drained else None
    # Not the scheduler's: the watch's polls and look at the backends, the first counting read.
    commits = after["commits"] - before["commits"] - polls - 2
    return {
        "subject": subject,
        "workers": workers,
        "jobs": jobs,
        "handlers_per_process": handlers_per_process(workers),
        "drain_s": None if drain_s is None else round(drain_s, 4),
        "jobs_per_s": None if drain_s is None else round(jobs / drain_s, 1),
        "duplicates": duplicates,
        "missing": missing,
        "commits_per_job": round(commits / jobs, 3),
        "wal_syncs_per_job": round((after["wal_syncs"] - before["wal_syncs"]) / jobs, 3),
        "wal_writes_per_job": round((after["wal_writes"] - before["wal_writes"]) / jobs, 3),
        "wal_bytes_per_job": round((after["wal_bytes"] - before["wal_bytes"]) / jobs),
        "peak_rss_mb": round(rss, 1),
        "worker_cpu_ms_per_job": round(worker_cpu * 1000 / jobs, 3),
        "server_cpu_ms_per_job": round(server_cpu * 1000 / jobs, 3),
        "load": round(os.getloadavg()[0], 2),
    }


MEDIANS = ("drain_s", "jobs_per_s", "commits_per_job", "wal_syncs_per_job", "wal_writes_per_job",
           "wal_bytes_per_job", "worker_cpu_ms_per_job", "server_cpu_ms_per_job", "peak_rss_mb",
           "load")  # fmt: skip


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over ``runs``; duplicates and misses: the worst run; RSS: the largest."""
    summary: dict[str, Any] = {"runs": len(runs), "jobs": runs[0]["jobs"]}
    for name in MEDIANS:
        values = [run[name] for run in runs if run[name] is not None]
        summary[name] = round(statistics.median(values), 3) if values else None
    summary["peak_rss_mb"] = max(run["peak_rss_mb"] for run in runs)
    summary["duplicates"] = max(run["duplicates"] for run in runs)
    summary["missing"] = max(run["missing"] for run in runs)
    summary["handlers_per_process"] = runs[0]["handlers_per_process"]
    return summary


@contextmanager
def _template(subject: str, server: str, jobs: int) -> Iterator[Any]:
    module = _template_module(subject)
    with harness.enqueued(f"handlers_{subject}", module, server, subject_jobs(subject, jobs)) as t:
        yield t


def measure_subjects(
    subjects: list[str], server: str, jobs: int, workers: list[int], profile: Path | None
) -> dict[str, Any]:
    """``{subject: {str(workers): [figures]}}``: one run of each of ``subjects`` (of this
    interpreter) at each worker count."""
    results: dict[str, dict[str, list[dict[str, Any]]]] = {subject: {} for subject in subjects}
    timeout = max(120.0, jobs / 20)
    with ExitStack() as stack:
        templates = {s: stack.enter_context(_template(s, server, jobs)) for s in subjects}
        for count in workers:
            for subject in (s for s in subjects if count <= MAX_WORKERS.get(s, count)):
                figures = run_once(subject, server, templates[subject], count, timeout, profile)
                results[subject][str(count)] = [figures]
                harness.say(
                    f"{subject:>20} w={count}: {figures['jobs_per_s']} jobs/s "
                    f"dup {figures['duplicates']} miss {figures['missing']} "
                    f"commits/job {figures['commits_per_job']} WAL syncs/job "
                    f"{figures['wal_syncs_per_job']} CPU ms/job worker "
                    f"{figures['worker_cpu_ms_per_job']} server "
                    f"{figures['server_cpu_ms_per_job']} RSS {figures['peak_rss_mb']} MB "
                    f"load {figures['load']}"
                )
    return results


def _peer_runs(
    peers: list[str], server: str, jobs: int, workers: list[int], profile: Path | None
) -> dict[str, Any]:
    """One run of each of ``peers`` at each worker count, in ``.venv-bench``."""
    profiled = [] if profile is None else ["--profile", str(profile)]
    done = subprocess.run(
        [str(PEERS_PYTHON), __file__, "--peer", *peers, "--server", server, "--jobs", str(jobs),
         "--workers", ",".join(map(str, workers)), *profiled],
        stdout=subprocess.PIPE, text=True, check=True,
    )  # fmt: skip
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def measure_lag(server: str, runs: int, seconds: float) -> dict[str, Any]:
    """Lag with this handler: ``bench/worker.py``'s recurring lag (1,000 schedules every second,
    2 worker processes) with each handler also INSERTing its key through a pool of `HANDLERS`
    connections, `HANDLERS` handlers at once per process; ``runs`` runs and their medians."""
    from _peers.lag import median_figures
    from _worker_lag import run_lag

    options = {"schedules": LAG_SCHEDULES, "seconds": seconds, "workers": LAG_WORKERS,
               "concurrency": HANDLERS, "margin": LAG_MARGIN_S, "handler": "insert"}  # fmt: skip
    found = []
    for run in range(1, runs + 1):
        result = run_lag("postgres", server, **options)  # type: ignore[arg-type]
        found.append(result)
        harness.say(
            f"lag with INSERT handlers run {run}/{runs}: p50 {result['p50_ms']} ms p99 "
            f"{result['p99_ms']} ms ran {result['ran']}/{result['due']} dup "
            f"{result['duplicates']} miss {result['misses']}"
        )
    median = median_figures(found)
    return {"runs": found, "median": median, "target_p99_ms": LAG_P99_TARGET_MS, **options}


def measure(
    subjects: list[str], server: str, jobs: int, workers: list[int], runs: int, profile: Path | None
) -> dict[str, Any]:
    """The JSON document of one run of this benchmark: every run's figures and the medians,
    every subject's run ``k`` before any subject's run ``k + 1``."""
    ours = [s for s in subjects if s not in PEER_SUBJECTS]
    peers = [s for s in subjects if s in PEER_SUBJECTS]
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {
        subject: {str(count): [] for count in workers} for subject in subjects
    }
    for run in range(1, runs + 1):
        harness.say(f"round {run}/{runs}")
        rounds = [measure_subjects(ours, server, jobs, workers, profile)] if ours else []
        if peers:
            rounds.append(_peer_runs(peers, server, jobs, workers, profile))
        for found in rounds:
            for subject, by_count in found.items():
                for count, figures in by_count.items():
                    raw[subject][count] += figures
    return {
        "jobs": jobs,
        "workers": workers,
        "runs": runs,
        "handlers": HANDLERS,
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "load": list(os.getloadavg()),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "postgres": harness.server_version(server),
        "command": " ".join(["python", "bench/handlers.py", *sys.argv[1:]]),
        "results": {
            subject: {
                count: {"runs": figures, "median": summarize(figures)}
                for count, figures in by_count.items()
                if figures
            }
            for subject, by_count in raw.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--workers", default="1,2", help="worker process counts (1,2; or 1,2,4,8)")
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--subjects", nargs="+", choices=SUBJECTS, default=list(SUBJECTS))
    parser.add_argument("--no-peers", action="store_true", help="oncely and the bare loop only")
    parser.add_argument("--peer", nargs="+", help=argparse.SUPPRESS)  # the run in .venv-bench
    parser.add_argument("--work", nargs=5, help=argparse.SUPPRESS)  # one worker process
    parser.add_argument(
        "--profile", type=Path, metavar="DIR",
        help="worker 0 of each run under cProfile, one pstats file per thread in DIR/SUBJECT-W",
    )  # fmt: skip
    parser.add_argument(
        "--lag-seconds", type=float, default=30.0,
        help="seconds of each lag run with INSERT handlers (0: none)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    parser.add_argument("--write", type=Path, metavar="PAGE", help="update PAGE's section")
    args = parser.parse_args()
    if args.work:
        subject, dsn, index, workers, jobs = args.work
        work(subject, dsn, int(index), int(workers), int(jobs))
        return
    workers = [int(count) for count in args.workers.split(",")]
    if args.peer:
        found = measure_subjects(args.peer, args.server, args.jobs, workers, args.profile)
        print(json.dumps(found))
        return
    subjects = [s for s in args.subjects if not (args.no_peers and s in PEER_SUBJECTS)]
    document = measure(subjects, args.server, args.jobs, workers, args.runs, args.profile)
    if args.lag_seconds and "oncely" in subjects:
        document["lag"] = measure_lag(args.server, args.runs, args.lag_seconds)
    from _handlers_page import handlers_section

    print("\n".join(handlers_section(document)))
    if args.json is not None:
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    if args.write is not None:
        from _report_page import replace_section

        replace_section(args.write, handlers_section(document))


if __name__ == "__main__":
    main()
