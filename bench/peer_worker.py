"""Peer schedulers under a steady load on PostgreSQL: procrastinate, pgqueuer, APScheduler 4.

What ``bench/worker.py`` measures for ``oncely run``, measured the same way for the peers:

Lag (``bench/_peers/lag.py``): ``--schedules`` keys (1,000) due at every whole second,
``--workers`` (2) worker processes, ``--seconds`` (60) per run; lag = handler start - due time
over the whole seconds of the window (the run without its first and last ``--margin`` seconds);
duplicates and misses counted. Two workloads (``--modes``): ``recurring`` (each peer's own
every-second schedules) and ``oneoff`` (one-off jobs due at each whole second, enqueued
beforehand).

Idle (``bench/_peers/idle.py``): ``--idle-schedules`` (100,000) hourly schedules none of which
comes due, one worker, ``--idle-seconds`` (60) measured after ``--idle-settle`` (12) seconds of
start-up and, if the worker is still busy then, once it is quiet (pgqueuer and procrastinate
expand code-registered schedules at start): PostgreSQL transactions and CPU seconds per minute.

What each peer uses for each workload, and its settings: ``bench/_peers/<peer>_schedules.py``.
Figures are medians of ``--runs`` (3); duplicates and misses the worst run. Run from the project
root, in the bench virtualenv (``make bench-peers`` creates it)::

    .venv-bench/bin/python bench/peer_worker.py --runs 3
    .venv-bench/bin/python bench/peer_worker.py --peers pgqueuer --modes oneoff --no-idle
    .venv-bench/bin/python bench/peer_worker.py --json - > peers.json     # tables on stderr
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

_BENCH_DIR = str(Path(__file__).resolve().parent)
if _BENCH_DIR not in sys.path:
    sys.path.insert(0, _BENCH_DIR)

from _peers import PEERS, harness, idle, lag, load_schedules  # noqa: E402

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432"


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def run_peer_lag(
    peers: Sequence[str],
    modes: Sequence[str],
    *,
    runs: int,
    schedules: int,
    seconds: float,
    margin: float,
    workers: int,
    server: str,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every peer's lag in every mode it can express, ``runs`` times each.

    ``[peer]["results"][mode]`` holds ``"runs"`` (each run's figures, see ``lag.run_lag``) and
    ``"median"`` (``lag.median_figures``); ``[peer]["modes"]`` says what the peer uses for each
    mode, ``[peer]["cannot"]`` lists the modes it cannot express.
    """
    document: dict[str, Any] = {}
    for name in peers:
        module = load_schedules(name)
        results = {}
        for mode in (m for m in modes if m in module.MODES):
            raw = []
            for run in range(1, runs + 1):
                result = lag.run_lag(
                    name, module, server, mode=mode, schedules=schedules, seconds=seconds,
                    workers=workers, margin=margin,
                )  # fmt: skip
                raw.append(result)
                say(
                    f"lag {name:>13} {mode:>9} w={workers} run {run}/{runs}: "
                    f"p50 {result['p50_ms']} ms p99 {result['p99_ms']} ms ran {result['ran']}/"
                    f"{result['due']} dup {result['duplicates']} miss {result['misses']}"
                    f" late start {result['late_start_s']} s"
                )
            results[mode] = {"runs": raw, "median": lag.median_figures(raw)}
        document[name] = {
            "modes": {m: module.MODES[m] for m in modes if m in module.MODES},
            "cannot": [mode for mode in modes if mode not in module.MODES],
            "settings": module.SETTINGS,
            "results": results,
        }
    return document


def run_peer_idle(
    peers: Sequence[str],
    *,
    runs: int,
    schedules: int,
    seconds: float,
    settle: float,
    server: str,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every peer's idle figures (``idle.run_idle``), with ``"median"`` added to each."""
    document: dict[str, Any] = {}
    for name in peers:
        module = load_schedules(name)
        say(f"idle {name:>13}: storing {schedules:,} hourly schedules ({module.MODES['idle']})")
        result = idle.run_idle(
            name, module, server, schedules=schedules, seconds=seconds, settle=settle, runs=runs
        )
        for run, figures in enumerate(result["runs"], 1):
            say(
                f"idle {name:>13} run {run}/{runs}: {figures['pg_transactions_per_min']} "
                f"transactions/min, {figures['cpu_s_per_min']} CPU-s/min, ran {figures['ran']}"
            )
        result["median"] = lag.median_figures(result["runs"])
        result["uses"] = module.MODES["idle"]
        document[name] = result
    return document


def run_peer_worker(args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, Any]:
    """The JSON document: settings, machine, versions, ``"lag"`` and ``"idle"`` as asked."""
    document: dict[str, Any] = {
        "lag_settings": {
            "schedules": args.schedules, "seconds": args.seconds, "margin": args.margin,
            "workers": args.workers, "modes": args.modes,
        },
        "idle_settings": {
            "schedules": args.idle_schedules, "seconds": args.idle_seconds,
            "settle": args.idle_settle,
        },
        "runs": args.runs,
        "machine": {
            "python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "postgres": harness.server_version(args.server),
        },
        "versions": {
            distribution: _version(distribution)
            for name in args.peers
            for distribution in load_schedules(name).DISTRIBUTIONS
        },
    }  # fmt: skip
    if not args.no_lag:
        document["lag"] = run_peer_lag(
            args.peers, args.modes, runs=args.runs, schedules=args.schedules,
            seconds=args.seconds, margin=args.margin, workers=args.workers, server=args.server,
            say=say,
        )  # fmt: skip
    if not args.no_idle:
        document["idle"] = run_peer_idle(
            args.peers, runs=args.runs, schedules=args.idle_schedules, seconds=args.idle_seconds,
            settle=args.idle_settle, server=args.server, say=say,
        )  # fmt: skip
    return document


def _cell(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_tables(document: dict[str, Any]) -> str:
    """Markdown tables of a ``run_peer_worker`` document's medians (dup/miss: worst run)."""
    lines = []
    if "lag" in document:
        s = document["lag_settings"]
        lines += [
            f"lag: {s['schedules']:,} keys due every second, {s['workers']} workers, "
            f"{s['seconds']:g} s per run without {s['margin']:g} s at each end; "
            f"medians of {document['runs']} run(s)",
            "",
            "| peer | mode | due | ran | p50 ms | p90 ms | p99 ms | max ms | dup | miss "
            "| enqueue s | worker CPU (cores) |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for name, info in document["lag"].items():
            for mode, result in info["results"].items():
                med = result["median"]
                lines.append(
                    f"| {name} | {mode} | {med['due']:,.0f} | {med['ran']:,.0f} "
                    f"| {_cell(med['p50_ms'], '.1f')} | {_cell(med['p90_ms'], '.1f')} "
                    f"| {_cell(med['p99_ms'], '.1f')} | {_cell(med['max_ms'], '.1f')} "
                    f"| {med['duplicates']} | {med['misses']} | {med['enqueue_s']:.1f} "
                    f"| {med['worker_cores']:.2f} |"
                )
            for mode in info["cannot"]:
                lines.append(f"| {name} | {mode} | cannot express it | | | | | | | | | |")
        lines.append("")
    if "idle" in document:
        s = document["idle_settings"]
        lines += [
            f"idle: {s['schedules']:,} hourly schedules, none due, 1 worker, {s['seconds']:g} s "
            f"after {s['settle']:g} s of start-up; medians of {document['runs']} run(s)",
            "",
            "| peer | insert s | start-up s | next due (min ahead) | PostgreSQL transactions/min "
            "| CPU s/min | % of a core | handler runs |",
            "|---|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for name, result in document["idle"].items():
            med = result["median"]
            lines.append(
                f"| {name} | {result['insert_s']:.1f} | {med['startup_s']:.0f} "
                f"| {result['next_due_min_ahead']:.0f} "
                f"| {med['pg_transactions_per_min']:.1f} | {med['cpu_s_per_min']:.3f} "
                f"| {med['core_percent']:.3f} | {med['ran']:.0f} |"
            )
        lines.append("")
    versions = ", ".join(f"{k} {v}" for k, v in document["versions"].items())
    lines.append(f"versions: {versions}; PostgreSQL {document['machine']['postgres']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point. A peer's duplicates or misses are figures, not failures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS))
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (median; 3)")
    parser.add_argument("--server", default=DEFAULT_SERVER, help="PostgreSQL, without a database")
    parser.add_argument("--no-lag", action="store_true")
    parser.add_argument("--no-idle", action="store_true")
    group = parser.add_argument_group("lag")
    group.add_argument("--modes", nargs="+", choices=lag.MODES, default=list(lag.MODES))
    group.add_argument("--schedules", type=int, default=1_000, help="keys due every second")
    group.add_argument("--seconds", type=float, default=60.0, help="per run")
    group.add_argument("--margin", type=float, default=5.0, help="seconds left out at each end")
    group.add_argument("--workers", type=int, default=2, help="worker processes")
    group = parser.add_argument_group("idle")
    group.add_argument("--idle-schedules", type=int, default=100_000)
    group.add_argument("--idle-seconds", type=float, default=60.0, help="measured per run")
    group.add_argument("--idle-settle", type=float, default=12.0, help="start-up left out")
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH",
        help="also write the JSON document to PATH; alone or '-', to stdout (tables to stderr)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if min(args.runs, args.schedules, args.workers, args.idle_schedules) < 1:
        parser.error("--runs, --schedules, --workers and --idle-schedules must be at least 1")
    if args.seconds <= 2 * args.margin + 1:
        parser.error("--seconds must leave at least one second between the two margins")
    out: TextIO = sys.stderr if args.json == "-" else sys.stdout
    started = time.perf_counter()
    document = run_peer_worker(args, harness.say)
    document["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(format_tables(document), file=out)
    print(f"elapsed: {document['elapsed_s']:.0f} s", file=out)
    if args.json == "-":
        json.dump(document, sys.stdout, indent=2)
        print()
    elif args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
