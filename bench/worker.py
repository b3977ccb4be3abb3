"""The worker process under a steady load: how late it starts what is due, and what idling costs.

Both measurements run real ``oncely run`` processes (``python -m oncely.cli run``), stopped with
SIGTERM (each must drain and exit 0), on PostgreSQL (a new database ``bench_worker_*`` per
measurement, dropped afterwards) and on SQLite (a file in a temp dir).

Lag (``bench/_worker_lag.py``): ``--schedules`` schedules (1,000), each ``every(seconds=1)``,
run for ``--seconds`` (60) by 2 worker processes on PostgreSQL and 1 on SQLite; with
``--modes oneoff`` (or ``recurring oneoff``), also one-offs (``app.defer``), ``--schedules`` due
at each whole second of the run, the workload every peer can express (``bench/peer_worker.py``
measures the peers the same way). With ``--handler insert`` (PostgreSQL, recurring), each
handler also does one autocommit ``INSERT`` of its key through a pool of 10 connections of its
process, as ``bench/handlers.py``'s does. Reported: the
p50/p90/p99/max of handler start minus ``scheduled_for`` over the occurrences due in the window
(the run without its first and last ``--margin`` seconds), occurrences run, duplicates, misses,
what ``app.history`` says of the window, and the workers' CPU. The issue's target: p99 under
100 ms. ``--profile`` adds one run per store with worker 0's loop under cProfile (not counted in
the medians: the profiler slows the loop) and prints where its time went.

Idle (``bench/_worker_idle.py``): ``--idle-schedules`` schedules (100,000) whose next run is over
an hour away, one worker, ``--idle-seconds`` (60) measured after ``--idle-settle`` seconds of
start-up: store queries, SQLite statements or PostgreSQL transactions, and CPU seconds, per
minute. The target: a handful of queries per minute and well under 1% of a core (0.6 CPU-s/min).

Figures are medians of ``--runs`` runs (3); duplicates and misses are the worst run. Run it from
the project root::

    .venv/bin/python bench/worker.py                   # both, both stores: about 15 minutes
    .venv/bin/python bench/worker.py --runs 5 --profile --json worker.json
    .venv/bin/python bench/worker.py --no-idle --stores sqlite --seconds 20
    .venv/bin/python bench/worker.py --no-idle --modes recurring oneoff
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

_BENCH_DIR = Path(__file__).resolve().parent
if str(_BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(_BENCH_DIR))

from _peers import harness  # noqa: E402
from _peers.lag import median_figures  # noqa: E402
from _worker_idle import run_idle_cost  # noqa: E402
from _worker_lag import HANDLERS, run_lag  # noqa: E402
from peers import DEFAULT_SERVER  # noqa: E402

STORES = ("postgres", "sqlite")
#: The JSON document's key for the lag figures of each mode.
LAG_KEYS = {"recurring": "lag", "oneoff": "oneoff_lag"}
TARGET_P99_MS = 100.0
TARGET_CPU_S_PER_MIN = 0.6


def _oncely_version() -> str:
    version = metadata.version("oncely")
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=_BENCH_DIR, capture_output=True,
            text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version} (git {described})"


def describe_setting(args: argparse.Namespace) -> dict[str, Any]:
    """The command, date and versions the figures belong to."""
    executable = sys.executable
    if executable.startswith(os.getcwd() + os.sep):
        executable = os.path.relpath(executable)
    return {
        "command": shlex.join([executable, *sys.argv]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "oncely": _oncely_version(),
        "python": platform.python_version(),
        "postgres": harness.server_version(args.server) if "postgres" in args.stores else None,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def run_lag_all(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    """Every lag run of every store in ``mode``, their medians, and the profiled runs if asked."""
    document: dict[str, Any] = {}
    for store in args.stores:
        workers = args.pg_workers if store == "postgres" else args.sqlite_workers
        options = {
            "schedules": args.schedules, "seconds": args.seconds, "workers": workers,
            "concurrency": args.concurrency, "margin": args.margin, "mode": mode,
            "handler": args.handler,
        }  # fmt: skip
        raw = []
        for run in range(1, args.runs + 1):
            result = run_lag(store, args.server, **options)
            raw.append(result)
            harness.say(
                f"lag {mode} {store:>8} w={workers} run {run}/{args.runs}: "
                f"p50 {result['p50_ms']} ms "
                f"p99 {result['p99_ms']} ms max {result['max_ms']} ms ran {result['ran']}/"
                f"{result['due']} dup {result['duplicates']} miss {result['misses']}"
            )
        entry: dict[str, Any] = {"runs": raw, "median": median_figures(raw)}
        if args.profile:
            entry["profiled"] = run_lag(store, args.server, **options, profile=True)
            harness.say(f"lag {mode} {store:>8} profiled run: p99 {entry['profiled']['p99_ms']} ms")
        document[store] = entry
    return document


def run_idle_all(args: argparse.Namespace) -> dict[str, Any]:
    """The idle figures of every store: the insert, every run, and the medians."""
    document: dict[str, Any] = {}
    for store in args.stores:
        harness.say(f"idle {store:>8}: saving {args.idle_schedules:,} schedules with app.schedule")
        result = run_idle_cost(
            store, args.server, schedules=args.idle_schedules, seconds=args.idle_seconds,
            settle=args.idle_settle, runs=args.runs, concurrency=args.concurrency,
        )  # fmt: skip
        for run, figures in enumerate(result["runs"], 1):
            harness.say(
                f"idle {store:>8} run {run}/{args.runs}: {figures['store_queries_per_min']} "
                f"queries/min, {figures['cpu_s_per_min']} CPU-s/min"
            )
        result["median"] = median_figures(result["runs"])
        document[store] = result
    return document


def _cell(value: Any, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def format_lag(document: dict[str, Any], args: argparse.Namespace, mode: str) -> list[str]:
    what = (
        f"{args.schedules:,} schedules, every(seconds=1)"
        if mode == "recurring"
        else f"one-offs, {args.schedules:,} due at each second (app.defer)"
    )
    lines = [
        f"## Lag: {what}, {args.seconds:g} s per run, "
        f"window without the first and last {args.margin:g} s",
        "",
        f"Medians of {args.runs} run(s); dup and miss: the worst run. Lag = handler start - "
        "scheduled_for. History: occurrences due in the window, by status.",
        "",
        "| store | workers | due | ran | p50 ms | p90 ms | p99 ms | max ms | dup | miss "
        "| history succeeded | history skipped | history other | worker CPU (cores) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    verdicts = []
    for store, entry in document.items():
        med = entry["median"]
        history = med["history"]
        other = sum(v for k, v in history.items() if k not in ("succeeded", "skipped"))
        lines.append(
            f"| {store} | {med['workers']} | {med['due']:,.0f} | {med['ran']:,.0f} "
            f"| {_cell(med['p50_ms'], '.1f')} | {_cell(med['p90_ms'], '.1f')} "
            f"| {_cell(med['p99_ms'], '.1f')} | {_cell(med['max_ms'], '.1f')} "
            f"| {med['duplicates']} | {med['misses']} | {history.get('succeeded', 0):,.0f} "
            f"| {history.get('skipped', 0):,.0f} | {other:,.0f} | {med['worker_cores']:.2f} |"
        )
        p99 = med["p99_ms"]
        met = p99 is not None and p99 < TARGET_P99_MS
        verdicts.append(f"{store} {'met' if met else 'MISSED'} ({_cell(p99, '.1f')} ms)")
    lines += ["", f"Target p99 < {TARGET_P99_MS:.0f} ms: {'; '.join(verdicts)}."]
    for store, entry in document.items():
        if "profiled" in entry:
            lines += ["", *format_profile(store, entry["profiled"])]
    return lines


def format_profile(store: str, run: dict[str, Any]) -> list[str]:
    profile = run["profile"]
    lines = [
        f"### Where worker 0's loop spent the window ({store}, profiled run: p99 "
        f"{_cell(run['p99_ms'], '.1f')} ms, max {_cell(run['max_ms'], '.1f')} ms)",
        "",
        "cProfile of the worker's main thread (the loop; handlers run on other threads), "
        "seconds per second of window; the profiler itself slows the loop.",
        "",
        "| step | calls/s | s per s |",
        "|---|--:|--:|",
    ]
    window = run["window_s"]
    for label, step in profile["steps"].items():
        name = label.replace("  ", "&nbsp;&nbsp;")
        lines.append(f"| {name} | {step['calls'] / window:,.1f} | {step['s_per_s']:.3f} |")
    lines += ["", "| function (own time) | calls/s | s per s |", "|---|--:|--:|"]
    for top in profile["top"]:
        lines.append(
            f"| `{top['function']}` | {top['calls'] / window:,.1f} | {top['own_s_per_s']:.3f} |"
        )
    lines += [
        "",
        "| statement (wall time, all threads) | calls/s | s per s | mean ms | max ms |",
        "|---|--:|--:|--:|--:|",
    ]
    for timed in profile["statements"]:
        lines.append(
            f"| {timed['statement']} | {timed['calls'] / window:,.1f} | {timed['s_per_s']:.3f} "
            f"| {timed['mean_ms']:.2f} | {timed['max_ms']:.1f} |"
        )
    return lines


def format_idle(document: dict[str, Any], args: argparse.Namespace) -> list[str]:
    lines = [
        f"## Idle: {args.idle_schedules:,} schedules, none due, 1 worker, {args.idle_seconds:g} s "
        f"measured after {args.idle_settle:g} s of start-up",
        "",
        f"Medians of {args.runs} run(s) on one database. Store queries: named SQL the worker's "
        "store sent (client side). SQLite statements: every statement run (trace callback, BEGIN "
        "and COMMIT included). PostgreSQL transactions: pg_stat_database xact_commit + "
        "xact_rollback of the database (pg_stat_statements is not loaded). Insert: "
        "app.schedule one by one.",
        "",
        "| store | schedules | insert s | next due (min ahead) | store queries/min "
        "| SQLite statements/min | PostgreSQL transactions/min | CPU s/min | % of a core |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    verdicts = []
    for store, entry in document.items():
        med = entry["median"]
        lines.append(
            f"| {store} | {entry['schedules']:,} | {entry['insert_s']:.1f} "
            f"| {entry['next_due_min_ahead']:.0f} | {med['store_queries_per_min']:.1f} "
            f"| {_cell(med['sqlite_statements_per_min'], '.1f')} "
            f"| {_cell(med['pg_transactions_per_min'], '.1f')} | {med['cpu_s_per_min']:.3f} "
            f"| {med['core_percent']:.3f} |"
        )
        met = med["cpu_s_per_min"] < TARGET_CPU_S_PER_MIN
        verdicts.append(f"{store} {'met' if met else 'MISSED'} ({med['cpu_s_per_min']:.3f})")
    lines += ["", f"Target < {TARGET_CPU_S_PER_MIN} CPU-s/min: {'; '.join(verdicts)}.", ""]
    for store, entry in document.items():
        for run, figures in enumerate(entry["runs"], 1):
            names = ", ".join(f"{name} {n}" for name, n in figures["queries"].items()) or "none"
            lines.append(f"- {store} run {run}: queries in {figures['window_s']:g} s: {names}")
    return lines


def format_report(document: dict[str, Any], args: argparse.Namespace) -> str:
    setting = document["setting"]
    lines = [
        "# oncely worker benchmark",
        "",
        f"- command: `{setting['command']}`",
        f"- date: {setting['date']}",
        f"- oncely {setting['oncely']}, Python {setting['python']}, PostgreSQL "
        f"{setting['postgres'] or '-'}, {setting['cpus']} CPUs, {setting['platform']}",
    ]
    for mode, key in LAG_KEYS.items():
        if key in document:
            lines += ["", *format_lag(document[key], args, mode)]
    if "idle" in document:
        lines += ["", *format_idle(document["idle"], args)]
    lines += ["", f"elapsed: {document['elapsed_s']:.0f} s"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (median; 3)")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--server", default=DEFAULT_SERVER, help="PostgreSQL, without a database")
    parser.add_argument(
        "--concurrency", type=int, default=8, help="oncely run --concurrency (its default, 8)"
    )
    parser.add_argument("--no-lag", action="store_true")
    parser.add_argument("--no-idle", action="store_true")
    lag = parser.add_argument_group("lag")
    lag.add_argument(
        "--modes", nargs="+", choices=tuple(LAG_KEYS), default=["recurring"],
        help="recurring: every(seconds=1) schedules; oneoff: app.defer one-offs (recurring)",
    )  # fmt: skip
    lag.add_argument("--schedules", type=int, default=1_000)
    lag.add_argument("--seconds", type=float, default=60.0, help="per run")
    lag.add_argument("--margin", type=float, default=5.0, help="seconds left out at each end")
    lag.add_argument("--pg-workers", type=int, default=2, help="worker processes on PostgreSQL")
    lag.add_argument("--sqlite-workers", type=int, default=1, help="worker processes on SQLite")
    lag.add_argument("--profile", action="store_true", help="one more run, worker 0 profiled")
    lag.add_argument(
        "--handler", choices=HANDLERS, default="file",
        help="file: the handler appends a line; insert: it also INSERTs into PostgreSQL "
        "(recurring, --stores postgres)",
    )  # fmt: skip
    idle = parser.add_argument_group("idle")
    idle.add_argument("--idle-schedules", type=int, default=100_000)
    idle.add_argument("--idle-seconds", type=float, default=60.0, help="measured per run")
    idle.add_argument(
        "--idle-settle", type=float, default=12.0, help="start-up seconds left out of each run"
    )
    parser.add_argument("--json", metavar="PATH", help="also write every figure to PATH")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.seconds <= 2 * args.margin + 1:
        parser.error("--seconds must leave at least one second between the two margins")
    if args.handler == "insert" and (args.stores != ["postgres"] or args.modes != ["recurring"]):
        parser.error(
            "--handler insert needs --stores postgres and --modes recurring: job tick INSERTs "
            "into PostgreSQL"
        )

    started = time.perf_counter()
    document: dict[str, Any] = {"setting": describe_setting(args)}
    if not args.no_lag:
        for mode in args.modes:
            document[LAG_KEYS[mode]] = run_lag_all(args, mode)
    if not args.no_idle:
        document["idle"] = run_idle_all(args)
    document["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(format_report(document, args))
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2, default=str) + "\n")
    bad = any(
        entry["median"]["duplicates"] or entry["median"]["misses"]
        for key in LAG_KEYS.values()
        for entry in document.get(key, {}).values()
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
