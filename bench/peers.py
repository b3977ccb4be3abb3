"""Burst benchmark of peer job queues on PostgreSQL: procrastinate, pgqueuer, APScheduler 4.

The workload ("burst"): ``--jobs`` jobs (20,000 by default; fewer for a peer whose module sets
``BURST_JOBS``: APScheduler and procrastinate, whose drains took minutes), all due now, are
enqueued, then drained by 1 worker process and, separately, by 2 worker processes started side
by side. The
handler of every job only appends its job number and a timestamp to its worker process's own
record file (one unbuffered ``write(2)``; no database work, identical for every peer), so
duplicates and missing jobs can be counted afterwards. oncely's own figures (``bench/engine.py``)
are quoted against the fastest peer measured in the same run, on the same PostgreSQL.

Measured for every peer, worker count and run (each run on a new copy of a database the jobs
were enqueued into once per peer; see ``bench/_peers/harness.py``):

* ``enqueue_s``: enqueueing all jobs with the peer's own bulk API, timed on its own, once;
* ``drain_s``: from the moment the already started and imported workers are told "go" (they
  connect after that) until the last handler ran; ``jobs_per_s`` is ``jobs / drain_s``;
* ``settled_s``: from "go" until the peer's own tables show every job finished;
* ``duplicates``: jobs whose handler ran more than once (must be 0); ``missing``: jobs whose
  handler never ran before the deadline (must be 0).

The table shows medians over ``--runs`` runs, except dup and miss: the worst run. ``--json`` adds
every run's raw figures, the settings chosen for each peer, and the library versions. Details
of the method: ``bench/_peers/harness.py``; each peer's settings and why:
``bench/_peers/*_peer.py``.

The peers live in their own virtualenv so they never become dependencies of oncely::

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install -r bench/requirements-peers.txt

Run it from the project root::

    .venv-bench/bin/python bench/peers.py --jobs 20000 --workers 1 2 --runs 5
    .venv-bench/bin/python bench/peers.py --quick                    # 2,000 jobs, 1 run
    .venv-bench/bin/python bench/peers.py --runs 3 --json > peers.json   # table on stderr
    .venv-bench/bin/python bench/peers.py --json peers.json --peers pgqueuer

From other code (in the bench virtualenv, with ``bench`` importable or on ``sys.path``):
``run_peers(jobs, workers, runs, peers)`` returns the same document as ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

_BENCH_DIR = str(Path(__file__).resolve().parent)
if _BENCH_DIR not in sys.path:
    sys.path.insert(0, _BENCH_DIR)

from _peers import PEERS, harness, load  # noqa: E402

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432"
QUICK_JOBS = 2_000
MEDIAN_FIELDS = ("enqueue_s", "drain_s", "settled_s", "jobs_per_s")
WORST_FIELDS = ("duplicates", "missing")


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def default_timeout(jobs: int) -> float:
    """Seconds a drain may take before the jobs not yet run count as missing."""
    return max(120.0, jobs / 20)


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the timed figures over ``runs``; worst run for duplicates and missing."""
    summary: dict[str, Any] = {"runs": len(runs)}
    for name in MEDIAN_FIELDS:
        values = [run[name] for run in runs if run[name] is not None]
        summary[name] = round(statistics.median(values), 4) if values else None
    for name in WORST_FIELDS:
        summary[name] = max(run[name] for run in runs)
    return summary


def run_peers(
    jobs: int,
    workers: list[int],
    runs: int,
    peers: list[str],
    *,
    server: str = DEFAULT_SERVER,
    timeout: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the burst for every peer and worker count ``runs`` times; return the JSON document.

    ``document["peers"][peer]["results"][str(w)]`` holds ``"runs"`` (the raw figures of every
    run, see ``harness.RunResult``) and ``"median"`` (see ``summarize``);
    ``document["fastest"][str(w)]`` names the peer with the highest median jobs/s for ``w``
    workers. ``server`` is a libpq URL without a database name; each peer uses its own
    ``bench_<peer>_<pid>`` database there, dropped and created anew for every run.
    """
    limit = timeout if timeout is not None else default_timeout(jobs)
    say = progress or (lambda _message: None)
    modules = {name: load(name) for name in peers}
    document: dict[str, Any] = {
        "benchmark": "burst",
        "jobs": jobs,
        "workers": workers,
        "runs": runs,
        "handler": "append '<job number> <time>' to the worker's own record file (one write(2))",
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "postgres": harness.server_version(server),
        },
        "versions": {},
        "peers": {},
        "fastest": {},
    }
    for name, module in modules.items():
        for distribution in module.DISTRIBUTIONS:
            document["versions"][distribution] = _version(distribution)
        results: dict[str, Any] = {}
        own = burst_jobs(module, jobs)
        with harness.enqueued(name, module, server, own) as template:
            for count in workers:
                results[str(count)] = run_series(
                    name, name, module, server, own, count, runs, limit, say, template=template
                )
        document["peers"][name] = {"settings": module.SETTINGS, "jobs": own, "results": results}
    for count in workers:
        rated = [
            (info["results"][str(count)]["median"]["jobs_per_s"] or 0.0, name)
            for name, info in document["peers"].items()
        ]
        if rated:
            best_rate, best = max(rated)
            document["fastest"][str(count)] = {"peer": best, "jobs_per_s": best_rate}
    return document


def burst_jobs(module: Any, jobs: int) -> int:
    """The jobs of ``module``'s burst: ``jobs``, or its ``BURST_JOBS`` if that is fewer."""
    return min(jobs, getattr(module, "BURST_JOBS", jobs))


def run_series(
    label: str,
    name: str,
    module: Any,
    server: str,
    jobs: int,
    workers: int,
    runs: int,
    timeout: float,
    say: Callable[[str], None],
    *,
    template: harness.Enqueued | None = None,
    target: Callable[[], AbstractContextManager[str]] | None = None,
) -> dict[str, Any]:
    """``runs`` runs of ``name`` with ``workers`` processes: every run's figures, and medians."""
    raw = []
    for run in range(1, runs + 1):
        result = harness.run_once(
            name, module, server, jobs, workers, timeout, target, template
        ).as_dict()
        raw.append(result)
        say(
            f"{label:>13} w={workers} run {run}/{runs}: enqueue {result['enqueue_s']:.2f}s"
            f" drain {_fmt(result['drain_s'], '.2f')}s"
            f" ({_fmt(result['jobs_per_s'], '.0f')} jobs/s)"
            f" dup {result['duplicates']} miss {result['missing']}"
            f" per worker {result['per_worker']}"
        )
    return {"runs": raw, "median": summarize(raw)}


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(document: dict[str, Any]) -> str:
    """The human-readable table of medians (dup/miss: worst run) of a ``run_peers`` document."""
    head = (
        f"{'peer':<14}{'workers':>8}{'jobs':>8}{'enqueue s':>11}{'drain s':>10}{'jobs/s':>9}"
        f"{'settled s':>11}{'dup':>6}{'miss':>6}"
    )
    lines = [
        f"burst: {document['jobs']:,} jobs, median of {document['runs']} run(s); "
        "dup/miss: worst run",
        head,
        "-" * len(head),
    ]
    for name, info in document["peers"].items():
        for count, result in info["results"].items():
            med = result["median"]
            lines.append(
                f"{name:<14}{count:>8}{info.get('jobs', document['jobs']):>8}"
                f"{_fmt(med['enqueue_s'], '.2f'):>11}"
                f"{_fmt(med['drain_s'], '.2f'):>10}{_fmt(med['jobs_per_s'], '.0f'):>9}"
                f"{_fmt(med['settled_s'], '.2f'):>11}{med['duplicates']:>6}{med['missing']:>6}"
            )
    versions = ", ".join(f"{k} {v}" for k, v in document["versions"].items())
    lines += ["", f"versions: {versions}", f"PostgreSQL {document['machine']['postgres']}"]
    return "\n".join(lines)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per burst (20,000)")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="worker process counts (1 2)"
    )
    parser.add_argument("--runs", type=int, default=5, help="runs per peer and count (5)")
    parser.add_argument(
        "--peers", nargs="+", choices=PEERS, default=list(PEERS), help="peers to run (all)"
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"smoke test: {QUICK_JOBS:,} jobs, 1 run"
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="also write the JSON document to PATH; alone, to stdout (the table then goes to "
        "stderr)",
    )
    parser.add_argument("--server", default=DEFAULT_SERVER, help=f"({DEFAULT_SERVER})")
    parser.add_argument(
        "--timeout", type=float, help="seconds a drain may take (default: max(120, jobs/20))"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.runs = QUICK_JOBS, 1
    if args.jobs < 1 or args.runs < 1 or min(args.workers) < 1:
        parser.error("--jobs, --runs and --workers must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns 1 if any run had duplicates or missing jobs."""
    args = _parse(argv)
    table_out: TextIO = sys.stderr if args.json == "-" else sys.stdout
    started = time.perf_counter()
    document = run_peers(
        args.jobs,
        args.workers,
        args.runs,
        args.peers,
        server=args.server,
        timeout=args.timeout,
        progress=harness.say,
    )
    document["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(format_table(document), file=table_out)
    print(f"elapsed: {document['elapsed_s']:.0f} s", file=table_out)
    if args.json == "-":
        json.dump(document, sys.stdout, indent=2)
        print()
    elif args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    bad = any(
        result["median"]["duplicates"] or result["median"]["missing"]
        for info in document["peers"].values()
        for result in info["results"].values()
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
