"""Peer-neutral half of the burst benchmark: databases, worker processes, records, figures.

One *run* of one peer with W workers:

1. its database ``bench_<peer>_<pid>`` is dropped and created anew (the pid keeps two benchmark
   processes on one server apart), and the peer installs its schema;
2. all jobs are enqueued (timed: ``enqueue_s``), each carrying its number ``0..jobs-1``. On
   PostgreSQL, steps 1 and 2 are done once per peer, into a template database (``enqueued``),
   vacuumed and analysed; each run's database is then created as a copy of it;
3. W worker processes (``python -m _peers.worker``) are started side by side. Each imports its
   library, opens its record file and says "ready"; once all are ready the clock starts (``t0``)
   and every worker is told "go". Interpreter start-up and imports are thus not timed; connecting
   to PostgreSQL and everything after is;
4. the handler of every job does one thing: ``record(n)`` appends ``"<n> <time.time()>\\n"`` to
   its process's own record file with one unbuffered ``write(2)`` (microseconds, no database
   work, and the same for every peer);
5. ``drain_s`` is the latest record time minus ``t0``, read once every job number has been
   recorded; ``settled_s`` is when the peer's own tables first showed no unfinished job (polled
   only after the drain, so the polling does not slow it), also from ``t0``. Once a peer has
   marked every job finished it can no longer run one again, so duplicates are counted after
   that point (plus ``GRACE_S``) and then the workers are killed;
6. ``duplicates`` is how many job numbers were recorded more than once, ``missing`` how many
   were never recorded (by the deadline), and the database is dropped.

Only the standard library and psycopg are used here.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, LiteralString

import psycopg
from psycopg import sql

from _peers import PeerModule

BENCH_DIR = Path(__file__).resolve().parent.parent
#: Seconds between two looks at the record files, or at the peer's tables once drained.
POLL_S = 0.05
#: Seconds the workers are left running after the peer's tables show every job finished.
GRACE_S = 0.5
#: Seconds a worker gets to exit after SIGTERM before it is killed.
STOP_S = 5.0
#: Seconds a refused administrative connection is retried (see ``admin_connection``).
ADMIN_WAIT_S = 120.0

_record_fd: int | None = None
_say_lock = threading.Lock()


def say(message: str) -> None:
    """Print one line of progress to stderr (whole lines, when threads say things at once)."""
    with _say_lock:
        print(message, file=sys.stderr, flush=True)


# --- worker side -------------------------------------------------------------------------------


def open_record(path: str) -> None:
    """Open this process's record file (append-only, unbuffered) for ``record``."""
    global _record_fd
    _record_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def record(job_no: int) -> None:
    """The benchmark's job handler body: note that job ``job_no`` ran, and when."""
    write_record(f"{job_no} {time.time():.6f}")


def write_record(line: str) -> None:
    """Append ``line`` to this process's record file with one ``write(2)``."""
    assert _record_fd is not None, "open_record() was not called"
    os.write(_record_fd, f"{line}\n".encode())


# --- databases ---------------------------------------------------------------------------------


def database_name(peer: str) -> str:
    """The database owned by ``peer``'s runs (never ``test``, ``t_*`` or ``oncely_*``)."""
    return f"bench_{peer}"


def dsn_for(server: str, database: str) -> str:
    """libpq URL of ``database`` on ``server`` (``postgresql://user@host:port``)."""
    return f"{server.rstrip('/')}/{database}"


def admin_connection(server: str) -> psycopg.Connection[Any]:
    """An autocommit connection to ``server``'s ``postgres`` database.

    The server may be shared with test suites that briefly take every connection slot
    ("too many clients already"): a refused connection is retried for up to ``ADMIN_WAIT_S``.
    """
    deadline = time.monotonic() + ADMIN_WAIT_S
    while True:
        try:
            return psycopg.connect(dsn_for(server, "postgres"), autocommit=True)
        except psycopg.OperationalError as exc:
            if "too many clients" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def _admin(server: str, statement: sql.Composable) -> None:
    with admin_connection(server) as conn:
        conn.execute(statement)


def drop_database(server: str, name: str) -> None:
    """Drop benchmark database ``name``, disconnecting anyone still using it."""
    if not name.startswith("bench_"):
        raise ValueError(f"refusing to drop {name!r}: not a benchmark database")
    _admin(server, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def recreate_database(server: str, name: str, template: str | None = None) -> None:
    """Drop (if present) and create benchmark database ``name``, a copy of ``template`` if given."""
    drop_database(server, name)
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        create += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    _admin(server, create)


def server_version(server: str) -> str:
    """The PostgreSQL server's version string."""
    with admin_connection(server) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"


# --- records -----------------------------------------------------------------------------------


class RecordReader:
    """Reads the workers' record files incrementally: job numbers seen and the last time."""

    def __init__(self, paths: list[Path]) -> None:
        self._files = [path.open("rb") for path in paths]
        self._partial = [b"" for _ in paths]
        self.per_worker = [0 for _ in paths]
        self.counts: Counter[int] = Counter()
        self.last_done = 0.0

    def poll(self) -> None:
        """Consume whatever complete lines were appended since the last call."""
        for i, fh in enumerate(self._files):
            data = self._partial[i] + fh.read()
            lines = data.split(b"\n")
            self._partial[i] = lines.pop()
            for line in lines:
                number, stamp = line.split()
                self.counts[int(number)] += 1
                self.last_done = max(self.last_done, float(stamp))
            self.per_worker[i] += len(lines)

    def close(self) -> None:
        for fh in self._files:
            fh.close()


# --- one run -----------------------------------------------------------------------------------


@dataclass
class RunResult:
    """The raw figures of one run of one peer with ``workers`` worker processes."""

    peer: str
    workers: int
    jobs: int
    enqueue_s: float
    #: Seconds from "go" to the last handler run; None if some job never ran by the deadline.
    drain_s: float | None
    #: Seconds from "go" until the peer's tables showed no unfinished job, if they did.
    settled_s: float | None
    jobs_per_s: float | None
    duplicates: int
    missing: int
    #: Handler runs in all (jobs + extra runs of duplicated jobs).
    executions: int
    #: Handler runs per worker process, in start order.
    per_worker: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class WorkerFailed(RuntimeError):
    """A worker process exited or misbehaved; the message carries its stderr's tail."""


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no stderr)"


def start_workers(
    peer: str, dsn: str, workers: int, tmp: Path, workload: Sequence[str] = ()
) -> tuple[list[subprocess.Popen[str]], list[Path], list[Path]]:
    """Start ``workers`` processes of ``python -m _peers.worker PEER DSN RECORD [WORKLOAD...]``.

    Returns the processes, their record files and their stderr files (all under ``tmp``).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH_DIR), env.get("PYTHONPATH")]))
    procs, records, logs = [], [], []
    for k in range(workers):
        records.append(tmp / f"worker{k}.records")
        logs.append(tmp / f"worker{k}.stderr")
        command = [sys.executable, "-m", "_peers.worker", peer, dsn, str(records[-1]), *workload]
        with logs[-1].open("w") as err:
            procs.append(
                subprocess.Popen(
                    command,
                    cwd=BENCH_DIR,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                )
            )
    return procs, records, logs


def release_workers(
    name: str, procs: list[subprocess.Popen[str]], logs: list[Path], at: float | None = None
) -> float:
    """Wait until every worker says "ready", then (at ``at``, if given) tell all "go".

    Returns the time "go" was sent (``time.time()``). Raises `WorkerFailed` if one did not start.
    """
    for proc, log in zip(procs, logs, strict=True):
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise WorkerFailed(f"{name} worker did not start:\n{_tail(log)}")
    if at is not None and (left := at - time.time()) > 0:
        time.sleep(left)
    t0 = time.time()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return t0


def check_workers(name: str, procs: list[subprocess.Popen[str]], logs: list[Path]) -> None:
    """Raise `WorkerFailed` if a worker has exited."""
    for proc, log in zip(procs, logs, strict=True):
        if proc.poll() is not None:
            raise WorkerFailed(f"{name} worker exited ({proc.returncode}):\n{_tail(log)}")


def stop_workers(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def unfinished(dsn: str, query: LiteralString) -> int:
    """Jobs a peer's tables still hold as not finished (``query`` returns one integer)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    return int(row[0]) if row else -1


@contextmanager
def postgres_database(server: str, name: str, template: str | None = None) -> Iterator[str]:
    """A new database ``bench_<name>_<pid>`` on ``server`` for one run (a copy of ``template``
    if given); its DSN; dropped after."""
    database = database_name(f"{name}_{os.getpid()}")
    recreate_database(server, database, template)
    try:
        yield dsn_for(server, database)
    finally:
        drop_database(server, database)


@contextmanager
def store_database(store: str, server: str, name: str) -> Iterator[str]:
    """A new, empty database for one measurement, as an oncely URL; dropped afterwards: a file in
    a temp dir on SQLite, ``bench_<name>_<pid>`` on ``server`` on PostgreSQL."""
    if store == "sqlite":
        with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'oncely.db'}"
        return
    with postgres_database(server, name) as dsn:
        yield dsn


@dataclass(frozen=True)
class Enqueued:
    """A PostgreSQL database holding a peer's schema and a whole burst, copied for each run."""

    database: str
    jobs: int
    enqueue_s: float


@contextmanager
def enqueued(name: str, peer: PeerModule, server: str, jobs: int) -> Iterator[Enqueued]:
    """Install ``peer`` and enqueue ``jobs`` once (timed), in a template every run copies.

    Enqueueing is not what the burst measures, and it was most of the benchmark's time:
    APScheduler took 107 s per run to enqueue 20,000 jobs, oncely's one-transaction-per-job
    ``app.defer`` 55 s. The template is vacuumed and analysed once enqueued, so that every run
    starts from the same planner statistics (autovacuum would otherwise analyse it between two
    runs, and the runs before and after would not compare). Dropped afterwards.
    """
    database = database_name(f"{name}_enqueued_{os.getpid()}")
    recreate_database(server, database)
    try:
        dsn = dsn_for(server, database)
        enqueue_s = _install_and_enqueue(peer, dsn, jobs)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        yield Enqueued(database, jobs, round(enqueue_s, 4))
    finally:
        drop_database(server, database)


def run_once(
    name: str,
    peer: PeerModule,
    server: str,
    jobs: int,
    workers: int,
    timeout: float,
    target: Callable[[], AbstractContextManager[str]] | None = None,
    template: Enqueued | None = None,
) -> RunResult:
    """Run the burst once for ``peer`` with ``workers`` processes; see the module docstring.

    ``target`` gives the database of the run (default: a new PostgreSQL database on ``server``);
    oncely passes its SQLite file this way. With ``template`` (see `enqueued`), the run's
    PostgreSQL database is a copy of it, and its ``enqueue_s`` is the template's.
    """
    if template is not None:
        if template.jobs != jobs:
            raise ValueError(f"the template holds {template.jobs} jobs, not {jobs}")
        with postgres_database(server, name, template.database) as dsn:
            return _run_in(name, peer, dsn, jobs, workers, timeout, template.enqueue_s)
    with (target or (lambda: postgres_database(server, name)))() as dsn:
        enqueue_s = _install_and_enqueue(peer, dsn, jobs)
        return _run_in(name, peer, dsn, jobs, workers, timeout, enqueue_s)


def _install_and_enqueue(peer: PeerModule, dsn: str, jobs: int) -> float:
    """Install ``peer``'s schema in ``dsn`` and enqueue ``jobs``; the seconds enqueueing took."""
    asyncio.run(peer.install(dsn))
    started = time.perf_counter()
    asyncio.run(peer.enqueue(dsn, jobs))
    return time.perf_counter() - started


def _run_in(
    name: str, peer: PeerModule, dsn: str, jobs: int, workers: int, timeout: float, enqueue_s: float
) -> RunResult:
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmpdir:
        procs, records, logs = start_workers(name, dsn, workers, Path(tmpdir))
        reader: RecordReader | None = None
        settled_at: float | None = None
        try:
            t0 = release_workers(name, procs, logs)
            reader = RecordReader(records)
            deadline = t0 + timeout
            while len(reader.counts) < jobs and time.time() < deadline:
                time.sleep(POLL_S)
                reader.poll()
                check_workers(name, procs, logs)
            if len(reader.counts) >= jobs:
                while time.time() < deadline + 30:
                    if peer.unfinished(dsn) == 0:
                        settled_at = time.time()
                        break
                    time.sleep(POLL_S)
            time.sleep(GRACE_S)
        finally:
            stop_workers(procs)
        assert reader is not None
        reader.poll()
        reader.close()

    counts = reader.counts
    missing = sum(1 for n in range(jobs) if n not in counts)
    drain_s = reader.last_done - t0 if missing == 0 else None
    return RunResult(
        peer=name,
        workers=workers,
        jobs=jobs,
        enqueue_s=round(enqueue_s, 4),
        drain_s=None if drain_s is None else round(drain_s, 4),
        settled_s=None if settled_at is None else round(settled_at - t0, 4),
        jobs_per_s=None if not drain_s else round(jobs / drain_s, 1),
        duplicates=sum(1 for c in counts.values() if c > 1),
        missing=missing,
        executions=sum(counts.values()),
        per_worker=reader.per_worker,
    )
