"""Every benchmark beside the peers, in one run, into ``docs/performance.md`` (``make bench``).

Runs each benchmark script with ``--runs N`` (5) and ``--json`` into a scratch directory, one
after the other, oncely's measurement next to its peers' so both see the same machine:

1. ``bench/recurrence.py``: recurrence expansion speed (dateutil's own ``rrule`` as the peer row);
2. ``bench/engine.py --no-peers`` (oncely's burst and idle tick), then ``bench/peers.py`` in
   ``.venv-bench`` (procrastinate, pgqueuer, APScheduler 4 on the same burst);
3. ``bench/worker.py --modes recurring oneoff`` per store (``oncely run``'s lag and idle cost),
   then ``bench/peer_worker.py`` per peer in ``.venv-bench`` (theirs, measured the same way);
4. ``bench/handlers.py``: a burst whose handlers INSERT into PostgreSQL, beside pgqueuer,
   procrastinate and the bare loop of the same INSERTs (the peers in ``.venv-bench``, which it
   runs itself); ``bench/enqueue.py``: bulk and single enqueue, beside pgqueuer and
   procrastinate (the same way);
5. ``bench/locks.py``: lock acquire/release pairs per second (no peer has a standalone lock);
6. ``bench/lint.py``: oncely lint beside flake8, lint-imports and ruff (its own output, quoted);
7. ``bench/history.py --scale 1m`` (``--history-scale`` for more, e.g. ``1m,10m,50m``: 17 minutes
   more; SQLite up to 10m): reads, retention and sizes as stored history grows.

Then it draws ``docs/performance-lag.png`` (lag p50/p90/p99 per scheduler) with matplotlib in
``.venv-bench`` (``bench/_lag_chart.py``) and writes ``docs/performance.md``
(``bench/_report_page.py``): per figure, oncely beside each peer, medians, ratios to each peer
measured in this run, versions, the date, the machine's load, and every command. A benchmark
that fails is run again after a pause (three attempts in all); if it still fails its section
says so, the rest is still written, and the exit status is 1.

Each benchmark's outcome (its JSON document, its output, when and at which commit it finished,
and a digest of the source it ran) is saved in ``bench/results/`` as it finishes, and committed
with the page: the figures behind it. A new run first empties that directory. The whole report
takes hours; ``--resume`` uses the outcomes already there that the same commands saved on the
same source, measures only the rest, and names in the page which figures came from earlier.
Resume on the same machine, soon after: a figure measured on another machine, or while it was
busier, does not compare with the rest (one session's development machine ran every burst at
about half the speed of the one a session before).

``--quick`` is a smoke test, not a measurement: tiny sizes, one run (whatever ``--runs``
says), benchmarks run side by side. ``--no-peers`` measures oncely alone and needs no
``.venv-bench``: no peer, no peer linter, no chart (``make test`` runs it with ``--quick``).
Run from the project root (``make bench`` creates both virtualenvs first)::

    .venv/bin/python bench/report.py                      # about 2.5 hours on 2 cores
    .venv/bin/python bench/report.py --runs 1             # one run of each: a quick look
    .venv/bin/python bench/report.py --quick --out /tmp/performance.md
    .venv/bin/python bench/report.py --resume             # go on where a stopped run stopped
    .venv/bin/python bench/report.py --quick --no-peers --out /tmp/performance.md
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

_BENCH_DIR = Path(__file__).resolve().parent
if str(_BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(_BENCH_DIR))

from _peers.harness import say  # noqa: E402
from _report_page import render_chart, render_page  # noqa: E402

ROOT = _BENCH_DIR.parent
ONCELY_PYTHON = ROOT / ".venv" / "bin" / "python"
PEERS_PYTHON = ROOT / ".venv-bench" / "bin" / "python"
#: Each benchmark's outcome, as the page was made from it (committed with the page).
RESULTS = _BENCH_DIR / "results"
PEERS = ("procrastinate", "pgqueuer", "apscheduler")
#: Distributions whose versions the page gives (as installed in .venv-bench).
PEER_DISTRIBUTIONS = (
    "procrastinate", "pgqueuer", "APScheduler", "SQLAlchemy", "psycopg", "psycopg-pool",
    "asyncpg", "anyio", "croniter", "matplotlib",
)  # fmt: skip
#: Lines of a failed benchmark's output kept in the page.
TAIL_LINES = 15
#: A failed benchmark is run again, after a pause, up to this many times in all: the PostgreSQL
#: server may be shared with test suites that take every connection for a while ("too many
#: clients already"), which the peers' own connection pools do not wait out.
ATTEMPTS = 3
RETRY_WAIT_S = 30.0
#: ``--quick`` runs this many benchmarks at once: more, on 2 cores, and worker processes are
#: still importing when their few seconds are up.
QUICK_PARALLEL = 6


@dataclass(frozen=True)
class Task:
    """One benchmark command: ``python script *args [--json PATH]``."""

    name: str
    python: Path
    script: str
    args: tuple[str, ...]
    #: The workload of a task that is one of several with this name (their results merge).
    part: str = ""
    #: Whether the script takes ``--json PATH`` (bench/lint.py does not: its output is quoted).
    json: bool = True

    def command(self, json_path: Path | None) -> list[str]:
        extra = ["--json", str(json_path)] if self.json and json_path else []
        return [str(self.python), str(_BENCH_DIR / self.script), *self.args, *extra]

    @property
    def label(self) -> str:
        return f"{self.name}-{self.part}" if self.part else self.name

    def shown(self) -> str:
        """The command as run from the project root, without the scratch ``--json`` path."""
        parts = [os.path.relpath(self.python, ROOT), f"bench/{self.script}", *self.args]
        return shlex.join(parts)


@dataclass
class Outcome:
    """What one task produced."""

    task: Task
    document: dict[str, Any] | None = None
    stdout: str = ""
    error: str | None = None
    elapsed_s: float = 0.0
    attempts: int = 0
    #: The script's exit status (non-zero with a document: it flagged duplicates or misses).
    status: int = 0
    load: list[float] = field(default_factory=list)
    #: When and at which commit an earlier run finished it, if ``--resume`` used its figures.
    kept_from: str | None = None


def plan(
    runs: int,
    quick: bool,
    peers: Sequence[str],
    lag_seconds: float,
    idle_seconds: float,
    history_scale: str = "1m",
) -> list[Task]:
    """The tasks of one report, in the order they run; with no ``peers``, oncely's alone.

    The worker benchmarks run one workload per command (``part``): recurring lag, one-off lag,
    idle cost, each for oncely's stores and then for every peer, so that what is compared is
    measured close together in time.
    """
    r = ("--runs", str(runs))
    no_peer_linters = () if peers else ("--no-peers",)
    if quick:
        burst = ("--jobs", "200", "--workers", "1")
        lag = ("--schedules", "5", "--seconds", "6", "--margin", "1")
        idle = ("--idle-schedules", "20", "--idle-seconds", "1", "--idle-settle", "3")
        recurrence, engine = ("--quick",), ("--sizes", "100", "200", "--ticks", "5")
        locks, lint = ("--seconds", "0.2"), ("--tree", "src/oncely")
    else:
        burst, lag = (), ("--seconds", f"{lag_seconds:g}")
        idle = ("--idle-seconds", f"{idle_seconds:g}")
        recurrence, engine, locks = (), (), ()
        lint = () if peers else ("--tree", "src/oncely")  # the default tree is .venv-bench's
    tasks = [
        Task("recurrence", ONCELY_PYTHON, "recurrence.py", (*r, *recurrence)),
        Task("burst-oncely", ONCELY_PYTHON, "engine.py", (*r, "--no-peers", *burst, *engine)),
    ]
    if peers:
        tasks.append(Task("burst-peers", PEERS_PYTHON, "peers.py", (*r, "--peers", *peers, *burst)))
    workloads = {
        "recurring": ("--no-idle", "--modes", "recurring", *lag),
        "oneoff": ("--no-idle", "--modes", "oneoff", *lag),
        "idle": ("--no-lag", *idle),
    }
    for part, workload in workloads.items():
        for store in ("postgres", "sqlite"):
            args = (*r, "--stores", store, *workload)
            tasks.append(Task(f"worker-{store}", ONCELY_PYTHON, "worker.py", args, part))
        for peer in peers:
            args = (*r, "--peers", peer, *workload)
            tasks.append(Task(f"worker-{peer}", PEERS_PYTHON, "peer_worker.py", args, part))
    enqueue = ("--jobs", "200", "--calls", "20") if quick else ()
    enqueue_peers = ("--peers", *(p for p in peers if p in ("pgqueuer", "procrastinate")))
    handlers = ("--jobs", "200", "--workers", "1", "--lag-seconds", "12") if quick else ()
    handler_peers = ("--subjects", "oncely", "oncely-transactional", *enqueue_peers[1:], "bare")
    tasks += [
        Task(
            "handlers",
            ONCELY_PYTHON,
            "handlers.py",
            (*r, *handlers, *(handler_peers if peers else ("--no-peers",))),
        ),
        Task(
            "enqueue",
            ONCELY_PYTHON,
            "enqueue.py",
            (*r, *enqueue, *(enqueue_peers if peers else ("--no-peers",))),
        ),
        Task("locks", ONCELY_PYTHON, "locks.py", (*r, *locks)),
        Task("lint", ONCELY_PYTHON, "lint.py", (*r, *lint, *no_peer_linters), json=False),
        Task(
            "history",
            ONCELY_PYTHON,
            "history.py",
            # Each run deletes two of the ten days stored: five runs at most. SQLite stops at
            # 10m: filling it with 50 million took an hour.
            (
                "--runs",
                str(min(runs, 5)),
                "--scale",
                "2k" if quick else history_scale,
                "--most",
                "sqlite=10m",
            ),
        ),
    ]
    return tasks


def _merged(first: Any, second: Any) -> Any:
    """``second`` merged into ``first``: dicts key by key, anything else as ``first`` has it."""
    if isinstance(first, dict) and isinstance(second, dict):
        both = {key: _merged(value, second[key]) for key, value in first.items() if key in second}
        return {**second, **first, **both}
    return first


def merge(outcomes: Sequence[Outcome]) -> dict[str, Outcome]:
    """One outcome per task name: the parts' documents merged, their errors joined."""
    merged: dict[str, Outcome] = {}
    for outcome in outcomes:
        name = outcome.task.name
        if name not in merged:
            merged[name] = dataclasses.replace(outcome, load=list(outcome.load))
            continue
        into = merged[name]
        if outcome.document is not None:
            into.document = _merged(into.document or {}, outcome.document)
        into.stdout += outcome.stdout
        into.status = into.status or outcome.status
        if outcome.error:
            label = f"{outcome.task.part}: {outcome.error}"
            into.error = label if into.error is None else f"{into.error}\n{label}"
        into.load += outcome.load
    return merged


#: Bench files that only make the page from the outcomes: changing them measures nothing anew.
PAGE_FILES = (
    "report.py",
    "_report_page.py",
    "_handlers_page.py",
    "_history_page.py",
    "_lag_chart.py",
)


def source_digest() -> str:
    """A digest of what the benchmarks run: oncely's source and SQL, the bench scripts (not
    those that only make the page) and the peers' pinned versions. An outcome saved under
    another digest measured other code, and is not reused."""
    digest = hashlib.sha256()
    files = [
        *(ROOT / "src" / "oncely").rglob("*.py"), *(ROOT / "src" / "oncely").rglob("*.sql"),
        *_BENCH_DIR.rglob("*.py"), _BENCH_DIR / "requirements-peers.txt",
    ]  # fmt: skip
    for path in sorted(files):
        page_only = path.parent == _BENCH_DIR and path.name in PAGE_FILES
        if "__pycache__" in path.parts or page_only:
            continue
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _saved(task: Task, results: Path) -> Path:
    return results / f"{task.label}.json"


def saved_outcome(task: Task, results: Path, source: str) -> Outcome | None:
    """The outcome saved in ``results`` for ``task`` by a run of the same command on the same
    source (`source_digest`), or None."""
    path = _saved(task, results)
    if not path.exists():
        return None
    saved = json.loads(path.read_text())
    if saved.get("command") != task.shown() or saved.get("source") != source:
        return None  # measured with other options, or other code: measure again
    return Outcome(
        task, document=saved["document"], stdout=saved["stdout"], elapsed_s=saved["elapsed_s"],
        attempts=saved["attempts"], status=saved["status"], load=saved["load"],
        kept_from=f"{saved['finished_at']}, git {saved['git']}",
    )  # fmt: skip


def save_outcome(outcome: Outcome, results: Path, source: str) -> None:
    """Save a benchmark's outcome in ``results``: the figures behind the page, kept beside it."""
    saved = {
        "command": outcome.task.shown(), "source": source, "git": _git_describe(),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "elapsed_s": outcome.elapsed_s, "attempts": outcome.attempts, "status": outcome.status,
        "load": outcome.load, "stdout": outcome.stdout, "document": outcome.document,
    }  # fmt: skip
    path = _saved(outcome.task, results)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(saved, indent=1) + "\n")
    partial.replace(path)  # a run stopped mid-write leaves no outcome that looks whole


def run_task(
    task: Task,
    scratch: Path,
    wait: float = RETRY_WAIT_S,
    results: Path | None = None,
    source: str = "",
    resume: bool = False,
) -> Outcome:
    """Run ``task`` (``ATTEMPTS`` times, ``wait`` s apart, while it fails), relaying its
    progress lines to stderr. A success is saved in ``results``; with ``resume``, an outcome
    already saved there by the same command on the same source is used instead."""
    if resume and results and (found := saved_outcome(task, results, source)) is not None:
        say(f"[{task.label}] measured earlier ({found.kept_from}): {task.shown()}")
        return found
    outcome = Outcome(task)
    started = time.perf_counter()
    for attempt in range(1, ATTEMPTS + 1):
        if attempt > 1:
            time.sleep(wait)
        outcome.attempts = attempt
        outcome.load.append(os.getloadavg()[0])
        json_path = scratch / f"{task.label}.json"
        json_path.unlink(missing_ok=True)
        say(f"[{task.label}] {task.shown()}" + (f" (attempt {attempt})" if attempt > 1 else ""))
        proc = subprocess.Popen(
            task.command(json_path), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        stderr_lines: list[str] = []

        def relay(stream: Any, sink: list[str] = stderr_lines, name: str = task.label) -> None:
            for line in stream:
                sink.append(line)
                say(f"[{name}] {line.rstrip()}")

        relayer = threading.Thread(target=relay, args=(proc.stderr,), daemon=True)
        relayer.start()
        stdout = proc.stdout.read() if proc.stdout else ""
        proc.wait()
        relayer.join()
        outcome.load.append(os.getloadavg()[0])
        outcome.stdout = stdout
        outcome.status = proc.returncode
        # A script that wrote its JSON finished: a status of 1 then flags duplicates or misses
        # it measured (bench/engine.py, worker.py, peers.py), figures to show, not to retry.
        if json_path.exists() if task.json else proc.returncode == 0:
            outcome.document = json.loads(json_path.read_text()) if task.json else None
            outcome.error = None
            break
        tail = (stdout.splitlines() + [line.rstrip() for line in stderr_lines])[-TAIL_LINES:]
        outcome.error = f"exit status {proc.returncode}:\n" + "\n".join(tail)
        say(f"[{task.label}] FAILED ({outcome.error.splitlines()[0]})")
    outcome.elapsed_s = round(time.perf_counter() - started, 1)
    if results is not None and outcome.error is None:
        save_outcome(outcome, results, source)
    return outcome


def _git_describe() -> str:
    try:
        return subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"], cwd=ROOT, capture_output=True,
            text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _versions(peers: bool) -> dict[str, str]:
    """oncely's version and commit; the peers' and their drivers', as installed in .venv-bench."""
    oncely = {"oncely": f"{metadata.version('oncely')} (git {_git_describe()})"}
    if not peers:
        return oncely
    script = (
        "import sys\nfrom importlib import metadata\nfor name in sys.argv[1:]:\n"
        "    try: print(name, metadata.version(name))\n"
        "    except metadata.PackageNotFoundError: print(name, 'not-installed')"
    )
    done = subprocess.run(
        [str(PEERS_PYTHON), "-c", script, *PEER_DISTRIBUTIONS],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    found = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    return {**oncely, **found}


def _missing_setup(peers: bool) -> list[str]:
    needed = (ONCELY_PYTHON, PEERS_PYTHON) if peers else (ONCELY_PYTHON,)
    missing = [str(p.relative_to(ROOT)) for p in needed if not p.exists()]
    if peers and PEERS_PYTHON.exists():
        probe = subprocess.run(
            [str(PEERS_PYTHON), "-c", "import matplotlib, procrastinate, pgqueuer, apscheduler"],
            capture_output=True, check=False,
        )  # fmt: skip
        if probe.returncode != 0:
            missing.append(".venv-bench's peers or matplotlib")
    return missing


def _draw_chart(merged: dict[str, Outcome], scratch: Path, chart: Path) -> str | None:
    """Draw the lag chart with .venv-bench's matplotlib; the error's tail if it failed."""
    spec = scratch / "chart.json"
    spec.write_text(json.dumps(render_chart(merged)))
    drawn = subprocess.run(
        [str(PEERS_PYTHON), str(_BENCH_DIR / "_lag_chart.py"), str(spec), str(chart)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return (
        (drawn.stderr.strip()[-500:] or f"exit status {drawn.returncode}")
        if drawn.returncode
        else None
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (median; 5)")
    parser.add_argument(
        "--lag-seconds", type=float, default=40.0, help="per lag run; 5 s left out at each end"
    )
    # Idle is five subjects times five runs, each after a start-up of its own (pgqueuer's took
    # 132 s): 60 s windows made it an hour of a two-hour report, for a handful of queries.
    parser.add_argument(
        "--idle-seconds", type=float, default=30.0, help="measured per idle run, after start-up"
    )
    parser.add_argument(
        "--history-scale", default="1m", help="bench/history.py's --scale (1m; e.g. 1m,10m,50m)"
    )
    parser.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS))
    parser.add_argument(
        "--no-peers", action="store_true",
        help="oncely alone, without .venv-bench: no peers, no peer linters, no chart",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="smoke test: tiny, side by side")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    parser.add_argument("--chart", type=Path, help="the PNG (default: <out>-lag.png)")
    parser.add_argument("--via", help="the command that ran this one, shown in the page")
    parser.add_argument(
        "--results", type=Path, metavar="DIR",
        help=f"where each benchmark's outcome is saved (default {RESULTS.relative_to(ROOT)}; "
        "with --quick, nowhere unless given); a new run first empties it",
    )  # fmt: skip
    parser.add_argument(
        "--resume", action="store_true",
        help="use the outcomes already in the results directory that the same commands saved "
        "on the same source, and measure only the rest: a report stopped part way goes on",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.quick:
        args.runs = 1
    if args.no_peers:
        args.peers = []
    if missing := _missing_setup(bool(args.peers)):
        parser.error(f"missing {', '.join(missing)}: 'make bench' creates both virtualenvs")
    chart = args.chart or args.out.with_name(f"{args.out.stem}-lag.png")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    chart.parent.mkdir(parents=True, exist_ok=True)
    script = os.path.relpath(Path(sys.argv[0]).resolve(), ROOT)
    command = shlex.join([os.path.relpath(sys.executable, ROOT), script, *sys.argv[1:]])
    tasks = plan(
        args.runs, args.quick, args.peers, args.lag_seconds, args.idle_seconds, args.history_scale
    )
    started_at, started = datetime.now(UTC), time.perf_counter()
    results = args.results or (None if args.quick else RESULTS)
    source = source_digest()
    if results is not None:
        results.mkdir(parents=True, exist_ok=True)
        if not args.resume:
            for stale in results.glob("*.json"):
                stale.unlink()  # what the page is made from is this run's alone
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        scratch = Path(tmp)
        if args.quick:
            with ThreadPoolExecutor(max_workers=QUICK_PARALLEL) as pool:
                outcomes = list(
                    pool.map(
                        lambda t: run_task(t, scratch, 1.0, results, source, args.resume), tasks
                    )
                )
        else:
            outcomes = [
                run_task(task, scratch, results=results, source=source, resume=args.resume)
                for task in tasks
            ]
        meta = {
            "command": command, "via": args.via, "date": started_at.isoformat(timespec="seconds"),
            "elapsed_s": round(time.perf_counter() - started, 1), "runs": args.runs,
            "quick": args.quick, "versions": _versions(bool(args.peers)), "cpus": os.cpu_count(),
            "chart": os.path.relpath(chart, args.out.parent), "no_peers": not args.peers,
            "kept": {o.task.label: o.kept_from for o in outcomes if o.kept_from},
        }  # fmt: skip
        merged = merge(outcomes)
        meta["chart_error"] = _draw_chart(merged, scratch, chart) if args.peers else None
    args.out.write_text(render_page(merged, outcomes, meta))
    failed = [o.task.label for o in outcomes if o.error] + (
        ["chart"] if meta["chart_error"] else []
    )
    wrote = f"{args.out} and {chart}" if args.peers else str(args.out)
    say(f"wrote {wrote} in {meta['elapsed_s']:.0f} s")
    if failed:
        say(f"failed: {', '.join(failed)} (their sections say why)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
