"""Lag of peer schedulers on PostgreSQL: procrastinate, pgqueuer and APScheduler 4.

How late each starts what is due, measured as ``bench/worker.py`` measures ``oncely run``:
``--schedules`` keys (1,000) due at every whole second, ``--workers`` (2) worker processes, for
``--seconds`` (60) per run; lag = handler start - due time over the whole seconds of the window
(the run without its first and last ``--margin`` seconds); duplicates and misses counted. Two
workloads (``--modes``): ``recurring`` (each peer's own every-second schedules) and ``oneoff``
(one-off jobs due at each whole second, enqueued beforehand). Method: ``bench/_peers/lag.py``;
what each peer uses and its settings: ``bench/_peers/<peer>_lag.py``.

Figures are medians of ``--runs`` (3); duplicates and misses the worst run. Run from the project
root, in the bench virtualenv (``make bench-peers`` creates it)::

    .venv-bench/bin/python bench/peer_lag.py --runs 3
    .venv-bench/bin/python bench/peer_lag.py --peers pgqueuer --modes oneoff --seconds 20
    .venv-bench/bin/python bench/peer_lag.py --json - > lag.json     # table on stderr
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

from _peers import PEERS, harness, lag, load_lag  # noqa: E402

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
    server: str = DEFAULT_SERVER,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every peer's lag in every mode it can express, ``runs`` times; the JSON document.

    ``document["peers"][peer]["results"][mode]`` holds ``"runs"`` (each run's figures, see
    ``lag.run_lag``) and ``"median"`` (``lag.median_figures``); ``["modes"]`` says what the
    peer uses for each mode, ``["cannot"]`` lists the modes it cannot express.
    """
    say = progress or (lambda _message: None)
    document: dict[str, Any] = {
        "benchmark": "lag",
        "schedules": schedules, "seconds": seconds, "margin": margin, "workers": workers,
        "runs": runs,
        "machine": {
            "python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "postgres": harness.server_version(server),
        },
        "versions": {},
        "peers": {},
    }  # fmt: skip
    for name in peers:
        module = load_lag(name)
        for distribution in module.DISTRIBUTIONS:
            document["versions"][distribution] = _version(distribution)
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
        document["peers"][name] = {
            "modes": module.MODES,
            "cannot": [mode for mode in modes if mode not in module.MODES],
            "settings": module.SETTINGS,
            "results": results,
        }
    return document


def _cell(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(document: dict[str, Any]) -> str:
    """The markdown table of medians (dup/miss: worst run) of a ``run_peer_lag`` document."""
    lines = [
        f"lag: {document['schedules']:,} keys due every second, {document['workers']} workers, "
        f"{document['seconds']:g} s per run without {document['margin']:g} s at each end; "
        f"medians of {document['runs']} run(s)",
        "",
        "| peer | mode | due | ran | p50 ms | p90 ms | p99 ms | max ms | dup | miss "
        "| enqueue s | worker CPU (cores) |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, info in document["peers"].items():
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
    versions = ", ".join(f"{k} {v}" for k, v in document["versions"].items())
    lines += ["", f"versions: {versions}; PostgreSQL {document['machine']['postgres']}"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point. A peer's duplicates or misses are figures, not failures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS))
    parser.add_argument("--modes", nargs="+", choices=lag.MODES, default=list(lag.MODES))
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (median; 3)")
    parser.add_argument("--schedules", type=int, default=1_000, help="keys due every second")
    parser.add_argument("--seconds", type=float, default=60.0, help="per run")
    parser.add_argument("--margin", type=float, default=5.0, help="seconds left out at each end")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--server", default=DEFAULT_SERVER, help="PostgreSQL, without a database")
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH",
        help="also write the JSON document to PATH; alone or '-', to stdout (table to stderr)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.runs < 1 or args.schedules < 1 or args.workers < 1:
        parser.error("--runs, --schedules and --workers must be at least 1")
    if args.seconds <= 2 * args.margin + 1:
        parser.error("--seconds must leave at least one second between the two margins")
    table_out: TextIO = sys.stderr if args.json == "-" else sys.stdout
    started = time.perf_counter()
    document = run_peer_lag(
        args.peers, args.modes, runs=args.runs, schedules=args.schedules, seconds=args.seconds,
        margin=args.margin, workers=args.workers, server=args.server,
        progress=lambda message: print(message, file=sys.stderr, flush=True),
    )  # fmt: skip
    document["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(format_table(document), file=table_out)
    print(f"elapsed: {document['elapsed_s']:.0f} s", file=table_out)
    if args.json == "-":
        json.dump(document, sys.stdout, indent=2)
        print()
    elif args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
