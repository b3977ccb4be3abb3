"""Enqueueing from application code: oncely's `defer_many` and `defer` beside the peers' own
bulk enqueue, in one run, on the same PostgreSQL.

Measured, each in a new database per run, medians of ``--runs`` (5):

* bulk: ``--jobs`` (20,000) one-offs due in an hour, each with its number as payload, put in
  by one call of `App.defer_many` (keyless, and with a key each: the idempotent form), on
  PostgreSQL and on SQLite; beside pgqueuer's ``Queries.enqueue`` with lists and procrastinate's
  ``batch_defer_async``, each called as ``bench/_peers/<peer>_peer.py`` does for the burst
  (1,000 jobs per call). Timed: the calls only, the schema installed and connected before.
* single: ``--calls`` (2,000) `App.defer` calls one after the other on PostgreSQL (keyless, and
  keyed), after 200 untimed; the p50 and p90 of one call. Beside it the floor: the p50 of a
  one-row INSERT and COMMIT through psycopg on the same server, the least a durable enqueue
  costs there (the commit waits for the WAL flush).

The peers run in ``.venv-bench`` (``bench/requirements-peers.txt``): this script runs itself
there with ``--peer NAME``, which imports no oncely. ``--write docs/performance.md`` replaces
the page's "Enqueue" section with this run's figures (`bench/report.py` writes the same section
in a whole report). Run from the project root::

    .venv/bin/python bench/enqueue.py --write docs/performance.md
    .venv/bin/python bench/enqueue.py --runs 1 --jobs 2000 --no-peers     # smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

_BENCH_DIR = Path(__file__).resolve().parent
if str(_BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(_BENCH_DIR))

from _peers import harness, load  # noqa: E402

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432"
PEERS_PYTHON = _BENCH_DIR.parent / ".venv-bench" / "bin" / "python"
ENQUEUE_PEERS = ("pgqueuer", "procrastinate")
WARM_CALLS = 200


def _peer_bulk(peer: str, server: str, jobs: int) -> float:
    """Seconds ``peer`` takes to enqueue ``jobs`` into a new database (run in .venv-bench)."""
    module = load(peer)
    name = harness.database_name(f"enqueue_{peer}_{os.getpid()}")
    with harness.postgres_database(server, name) as dsn:
        asyncio.run(module.install(dsn))
        started = time.perf_counter()
        asyncio.run(module.enqueue(dsn, jobs))
        return time.perf_counter() - started


def _oncely_app(url: str) -> Any:
    import oncely

    app = oncely.App(url)

    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    app.migrate()
    return app


def _items(jobs: int, keyed: bool) -> list[dict[str, Any]]:
    at = datetime.now(UTC) + timedelta(hours=1)
    if keyed:
        return [{"at": at, "key": f"remind:{n}", "payload": n} for n in range(jobs)]
    return [{"at": at, "payload": n} for n in range(jobs)]


def _oncely_bulk(url: str, jobs: int, keyed: bool) -> float:
    app = _oncely_app(url)
    try:
        items = _items(jobs, keyed)
        started = time.perf_counter()
        app.defer_many("remind", items)
        return time.perf_counter() - started
    finally:
        app.close()


def _oncely_single(url: str, calls: int, keyed: bool) -> tuple[float, float]:
    """p50 and p90 of one `App.defer`, in milliseconds."""
    app = _oncely_app(url)
    at = datetime.now(UTC) + timedelta(hours=1)
    took = []
    try:
        for n in range(WARM_CALLS + calls):
            started = time.perf_counter()
            app.defer("remind", at=at, key=f"remind:{n}" if keyed else None, payload=n)
            took.append(time.perf_counter() - started)
    finally:
        app.close()
    timed = sorted(took[WARM_CALLS:])
    return timed[len(timed) // 2] * 1000, timed[len(timed) * 9 // 10] * 1000


def _commit_floor(dsn: str, calls: int) -> float:
    """p50 of one one-row INSERT and its COMMIT through psycopg, in milliseconds: what any
    durable single enqueue on this server costs at least."""
    import psycopg

    took = []
    with psycopg.connect(dsn) as connection:
        connection.execute("CREATE TABLE floor (n integer)")
        connection.commit()
        for n in range(WARM_CALLS + calls):
            started = time.perf_counter()
            connection.execute("INSERT INTO floor VALUES (%s)", (n,))
            connection.commit()
            took.append(time.perf_counter() - started)
    return statistics.median(took[WARM_CALLS:]) * 1000


def _in_postgres(server: str, what: str) -> Any:
    name = harness.database_name(f"enqueue_oncely_{what}_{os.getpid()}")
    return harness.postgres_database(server, name)


def _summary(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "runs": values}


def measure(runs: int, jobs: int, calls: int, server: str, peers: list[str]) -> dict[str, Any]:
    """Every figure of one run of this benchmark, as its JSON document."""
    figures: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    for _ in range(runs):
        for keyed, suffix in ((False, ""), (True, "_keyed")):
            with _in_postgres(server, f"bulk{suffix}") as dsn:
                add(f"postgres.bulk{suffix}_s", _oncely_bulk(dsn, jobs, keyed))
            with tempfile.TemporaryDirectory(prefix="bench-enqueue-") as tmp:
                url = f"sqlite:///{Path(tmp) / 'oncely.db'}"
                add(f"sqlite.bulk{suffix}_s", _oncely_bulk(url, jobs, keyed))
            with _in_postgres(server, f"single{suffix}") as dsn:
                p50, p90 = _oncely_single(dsn, calls, keyed)
                add(f"postgres.single{suffix}_p50_ms", p50)
                add(f"postgres.single{suffix}_p90_ms", p90)
        with _in_postgres(server, "floor") as dsn:
            add("postgres.commit_floor_p50_ms", _commit_floor(dsn, calls))
        for peer in peers:
            done = subprocess.run(
                [str(PEERS_PYTHON), __file__, "--peer", peer, "--server", server,
                 "--jobs", str(jobs)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            add(f"{peer}.bulk_s", float(done.stdout.strip()))
    document: dict[str, Any] = {
        "runs": runs,
        "jobs": jobs,
        "calls": calls,
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "load": list(os.getloadavg()),
        "python": platform.python_version(),
        "postgres": harness.server_version(server),
        "command": " ".join(["python", "bench/enqueue.py", *sys.argv[1:]]),
        "oncely": {"postgres": {}, "sqlite": {}},
        "peers": {},
    }
    for name, values in figures.items():
        owner, figure = name.split(".")
        where = document["oncely"] if owner in ("postgres", "sqlite") else document["peers"]
        where.setdefault(owner, {})[figure] = _summary(values)
    for peer in peers:
        document["peers"][peer]["settings"] = (
            f"as bench/_peers/{peer}_peer.py: {_peer_enqueue_setting(peer)}"
        )
    return document


def _peer_enqueue_setting(peer: str) -> str:
    done = subprocess.run(
        [str(PEERS_PYTHON), "-c",
         f"import sys; sys.path.insert(0, {str(_BENCH_DIR)!r}); from _peers import load; "
         f"print(load({peer!r}).SETTINGS['enqueue'])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--peers", nargs="*", default=list(ENQUEUE_PEERS))
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--peer", help=argparse.SUPPRESS)  # the run inside .venv-bench
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    parser.add_argument("--write", type=Path, metavar="PAGE", help="update PAGE's section")
    args = parser.parse_args()
    if args.peer:
        print(_peer_bulk(args.peer, args.server, args.jobs))
        return
    peers = [] if args.no_peers else args.peers
    document = measure(args.runs, args.jobs, args.calls, args.server, peers)
    from _report_page import enqueue_section

    print("\n".join(enqueue_section(document)))
    if args.json is not None:
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    if args.write is not None:
        from _report_page import replace_section

        replace_section(args.write, enqueue_section(document))


if __name__ == "__main__":
    main()
