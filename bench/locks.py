"""Lock throughput: acquire+release pairs per second, per provider, alone and contended.

For each provider (the app's SQLite store, the app's PostgreSQL store, Redis) and each thread
count (1, and 8 contending for the same lock name), the threads take and release one lock as
fast as they can for ``--seconds``; the figure is successful acquire+release pairs per second
over all threads. Contending threads use ``blocking=True`` (a failed attempt retries with a
backoff starting at 50 ms), so the 8-thread figure shows what a hot lock costs, not only the
round trips. Medians of ``--runs`` (5). Run from the project root::

    .venv/bin/python bench/locks.py
    .venv/bin/python bench/locks.py --seconds 1 --runs 1        # smoke test
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import redis as redis_client
from psycopg import sql

import oncely

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/14"
PROVIDERS = ("sqlite", "postgres", "redis")
THREADS = (1, 8)


def measure(app: oncely.App, provider: str, threads: int, seconds: float) -> float:
    """Acquire+release pairs per second by ``threads`` threads sharing one lock name."""
    chosen = oncely.locks.redis(REDIS) if provider == "redis" else None
    lock = app.lock(
        f"bench-{uuid.uuid4().hex[:8]}",
        at_most=timedelta(seconds=30),
        provider=chosen,
        blocking=threads > 1,
        timeout=30,
    )
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    deadline = 0.0

    def hammer(n: int) -> None:
        start.wait()
        while time.monotonic() < deadline:
            with lock:
                counts[n] += 1

    workers = [threading.Thread(target=hammer, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + seconds
    began = time.monotonic()
    start.wait()
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - began
    if chosen is not None:
        chosen.close()
    return sum(counts) / elapsed


def app_for(provider: str, tmp: Path) -> tuple[oncely.App, str | None]:
    if provider == "postgres":
        name = f"bench_locks_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return oncely.App(POSTGRES.rsplit("/", 1)[0] + f"/{name}"), name
    return oncely.App(f"sqlite:///{tmp / f'{uuid.uuid4().hex[:8]}.db'}"), None


def drop(name: str | None) -> None:
    if name is not None:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    args = parser.parse_args()
    redis_client.Redis.from_url(REDIS).flushdb()
    figures: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-locks-") as tmp:
        for _ in range(args.runs):
            for provider in PROVIDERS:
                app, database = app_for(provider, Path(tmp))
                app.migrate()
                try:
                    for threads in THREADS:
                        rate = measure(app, provider, threads, args.seconds)
                        figures.setdefault((provider, threads), []).append(rate)
                finally:
                    app.close()
                    drop(database)
    redis_client.Redis.from_url(REDIS).flushdb()
    with psycopg.connect(POSTGRES) as conn:
        pg_version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    redis_version = redis_client.Redis.from_url(REDIS).info()["redis_version"]
    print(f"# bench/locks.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(
        f"`{' '.join([Path(sys.executable).name, *sys.argv])}`; "
        f"Python {platform.python_version()}, "
        f"PostgreSQL {pg_version}, Redis {redis_version}; medians of {args.runs} runs of "
        f"{args.seconds:g} s\n"
    )
    print("| provider | 1 thread (pairs/s) | 8 contending threads (pairs/s) |")
    print("|---|---:|---:|")
    for provider in PROVIDERS:
        cells = [f"{statistics.median(figures[(provider, t)]):,.0f}" for t in THREADS]
        print(f"| {provider} | {' | '.join(cells)} |")
    if args.json is not None:
        document = {
            "runs": args.runs,
            "seconds": args.seconds,
            "python": platform.python_version(),
            "postgres": pg_version,
            "redis": redis_version,
            "pairs_per_s": {
                provider: {
                    str(t): {
                        "median": statistics.median(figures[(provider, t)]),
                        "runs": figures[(provider, t)],
                    }
                    for t in THREADS
                }
                for provider in PROVIDERS
            },
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
