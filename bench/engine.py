"""oncely's engine under load: a burst drained by worker processes, and the cost of idling.

Burst: ``--jobs`` occurrences (20,000) all due now, a trivial handler, drained by 1 and by 2
worker processes started side by side, on PostgreSQL and on SQLite. The method is the one
``bench/peers.py`` uses for procrastinate, pgqueuer and APScheduler 4 (``bench/_peers/harness.py``:
fresh database per run, workers started and imported before the clock starts, the handler appends
its job number to a per-process file, duplicates and missing jobs counted from those files).
Unless ``--no-peers``, the peers run in the same invocation, on the same PostgreSQL, through
``.venv-bench`` (see ``bench/requirements-peers.txt``), and each oncely PostgreSQL figure is
given as a ratio to the fastest peer with the same number of workers.

Idle: N schedules stored (1,000 and 100,000), none due; one tick is timed ``--ticks`` times and
the named queries it sends are counted. A tick should send the same queries whatever N is, each
reading an index, so the 100k/1k time ratio should stay near 1.

Figures are medians of ``--runs`` runs (5). Run from the project root::

    .venv/bin/python bench/engine.py                         # everything, several minutes
    .venv/bin/python bench/engine.py --quick --no-peers      # smoke test
    .venv/bin/python bench/engine.py --json engine.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

_BENCH_DIR = Path(__file__).resolve().parent
if str(_BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(_BENCH_DIR))

from _idle import run_idle  # noqa: E402
from _peers import SUBJECT, harness, load  # noqa: E402
from peers import DEFAULT_SERVER, default_timeout, run_series  # noqa: E402

PEERS_PYTHON = _BENCH_DIR.parent / ".venv-bench" / "bin" / "python"
STORES = ("postgres", "sqlite")


@contextmanager
def sqlite_file() -> Iterator[str]:
    """A new SQLite database file for one run; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bench-oncely-") as tmp:
        yield f"sqlite:///{Path(tmp) / 'oncely.db'}"


def run_burst(
    jobs: int, workers: list[int], runs: int, stores: list[str], server: str
) -> dict[str, Any]:
    """oncely's burst figures per store and worker count: every run, and the medians."""
    module = load(SUBJECT)
    document: dict[str, Any] = {}
    for store in stores:
        # SQLite: a new file per run, enqueued each time (seconds); PostgreSQL: a copy of
        # one database enqueued once (app.defer one transaction per job took 55 s a run).
        target = sqlite_file if store == "sqlite" else None
        enqueue: AbstractContextManager[harness.Enqueued | None] = (
            nullcontext() if store == "sqlite" else harness.enqueued(SUBJECT, module, server, jobs)
        )
        with enqueue as template:
            document[store] = {
                str(count): run_series(
                    f"oncely {store}", SUBJECT, module, server, jobs, count, runs,
                    default_timeout(jobs), harness.say, template=template, target=target,
                )
                for count in workers
            }  # fmt: skip
    return document


def run_peer_bench(jobs: int, workers: list[int], runs: int, server: str) -> dict[str, Any]:
    """The peers' document from ``bench/peers.py``, run in the bench virtualenv."""
    if not PEERS_PYTHON.exists():
        raise SystemExit(
            f"{PEERS_PYTHON} is missing: python3 -m venv .venv-bench && "
            ".venv-bench/bin/pip install -r bench/requirements-peers.txt (or pass --no-peers)"
        )
    command = [
        str(PEERS_PYTHON), str(_BENCH_DIR / "peers.py"), "--json", "-", "--jobs", str(jobs),
        "--runs", str(runs), "--server", server, "--workers", *map(str, workers),
    ]  # fmt: skip
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def format_report(document: dict[str, Any]) -> str:
    lines = [f"burst: {document['jobs']:,} occurrences, medians of {document['runs']} runs"]
    head = (
        f"{'':<24}{'workers':>8}{'enqueue s':>11}{'drain s':>10}{'jobs/s':>9}{'dup':>5}{'miss':>6}"
    )
    lines += [head, "-" * len(head)]
    rows: list[tuple[str, str, dict[str, Any]]] = []
    for store, by_count in document["oncely"].items():
        rows += [(f"oncely ({store})", count, r["median"]) for count, r in by_count.items()]
    for peer, info in document.get("peers", {}).get("peers", {}).items():
        rows += [(f"{peer} (postgres)", c, r["median"]) for c, r in info["results"].items()]
    for name, count, med in rows:
        lines.append(
            f"{name:<24}{count:>8}{med['enqueue_s']:>11.2f}{med['drain_s'] or 0:>10.2f}"
            f"{med['jobs_per_s'] or 0:>9.0f}{med['duplicates']:>5}{med['missing']:>6}"
        )
    for count, fastest in document.get("peers", {}).get("fastest", {}).items():
        ours = document["oncely"].get("postgres", {}).get(count, {}).get("median", {})
        if ours.get("jobs_per_s") and fastest["jobs_per_s"]:
            ratio = ours["jobs_per_s"] / fastest["jobs_per_s"]
            lines.append(
                f"{count} worker(s): oncely on PostgreSQL {ours['jobs_per_s']:.0f} jobs/s = "
                f"{ratio:.2f}x the fastest peer ({fastest['peer']}, "
                f"{fastest['jobs_per_s']:.0f} jobs/s)"
            )
    idle = document.get("idle", {})
    if idle:
        lines += ["", "idle tick (nothing due): median ms per tick, queries per tick"]
        for dialect, info in idle.items():
            sizes = "  ".join(
                f"{int(n):,}: {s['tick_ms']:.2f} ms, {s['queries']} queries"
                for n, s in info["sizes"].items()
            )
            lines.append(f"  {dialect:<9}{sizes}  ratio {info['ratio']:.2f}")
            largest = list(info["sizes"].values())[-1]
            lines.append(f"  {'':<9}queries: {', '.join(largest['names'])}")
            for name, plan in largest["plans"].items():
                lines.append(f"  {'':<9}{name}: {plan}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--no-peers", action="store_true", help="oncely only")
    parser.add_argument("--no-idle", action="store_true")
    parser.add_argument("--no-burst", action="store_true")
    parser.add_argument("--quick", action="store_true", help="2,000 jobs, 1 run, small sizes")
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--json", metavar="PATH", help="also write every figure to PATH")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.runs, args.sizes, args.ticks = 2_000, 1, [100, 1_000], 50
    started = time.perf_counter()
    document: dict[str, Any] = {"jobs": args.jobs, "runs": args.runs, "oncely": {}}
    if not args.no_burst:
        document["oncely"] = run_burst(args.jobs, args.workers, args.runs, args.stores, args.server)
        if not args.no_peers:
            document["peers"] = run_peer_bench(args.jobs, args.workers, args.runs, args.server)
    if not args.no_idle:
        document["idle"] = run_idle(args.stores, args.sizes, args.runs, args.ticks, args.server)
    document["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(format_report(document))
    print(f"elapsed: {document['elapsed_s']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2, default=str) + "\n")
    bad = any(
        r["median"]["duplicates"] or r["median"]["missing"]
        for by_count in document["oncely"].values()
        for r in by_count.values()
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
