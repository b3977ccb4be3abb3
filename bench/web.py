"""Dashboard page render times at scale: 100,000 schedules and 1,000,000 occurrences stored.

A throw-away PostgreSQL database is migrated by oncely, filled with COPY (schedules of one job,
every hour, a tenth of them in tenant ``acme``; ten occurrences each, hourly back from now: nine
in ten succeeded, some failed with a traceback, some skipped with a reason) and ANALYZEd. Then
each page is requested ``--runs`` times through the dashboard's ASGI app in this process (no
network: the figure is the dashboard's own work, queries and rendering), after one warm-up
request; the figure is the median, in milliseconds. Run from the project root::

    .venv/bin/python bench/web.py                                   # 100,000 / 1,000,000
    .venv/bin/python bench/web.py --schedules 2000 --per 10 --runs 1   # smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import sql

import oncely
from oncely.web import dashboard

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
TARGET_MS = 200.0
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/tasks.py", line 41, in remind\n'
    "    send(run.payload)\n"
    "RuntimeError: upstream answered 503\n"
)


@contextmanager
def database(admin: str) -> Iterator[str]:
    name = f"oncely_bench_web_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield admin.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name))
            )


def build(url: str) -> oncely.App:
    app = oncely.App(url, clock=lambda: NOW)

    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    @app.job(oncely.every(minutes=5))
    def beat(run: oncely.Run) -> None:
        pass

    return app


SCHEDULE_COLUMNS = (
    "id", "tenant", "key", "job", "origin", "trigger_kind", "trigger_spec", "payload",
    "next_run_at", "created_at", "updated_at",
)  # fmt: skip
OCCURRENCE_COLUMNS = (
    "schedule_id", "tenant", "scheduled_for", "status", "reason", "attempts", "run_after",
    "started_at", "finished_at", "worker", "error", "created_at",
)  # fmt: skip


def schedule_rows(
    schedules: int, every: timedelta = timedelta(hours=1), lead: timedelta = timedelta(0)
) -> Iterator[tuple[Any, ...]]:
    """Schedules 1..``schedules`` of job remind, a tenth in tenant acme, next runs spread over
    the hour after ``NOW + lead``; in `SCHEDULE_COLUMNS` order."""
    spec = json.dumps(oncely.every(seconds=int(every.total_seconds())).to_spec())
    for n in range(1, schedules + 1):
        tenant = "acme" if n % 10 == 0 else ""
        next_run = NOW + lead + timedelta(minutes=n % 60)
        yield (n, tenant, f"remind:{n:07d}", "remind", "api", "every", spec,
               json.dumps({"user": n}), next_run, NOW, NOW)  # fmt: skip


def occurrence_rows(
    schedules: int, per: int, every: timedelta = timedelta(hours=1)
) -> Iterator[tuple[Any, ...]]:
    """``per`` occurrences of each schedule, ``every`` apart back from now: nine in ten
    succeeded, some failed with a traceback, some skipped; in `OCCURRENCE_COLUMNS` order."""
    for n in range(1, schedules + 1):
        tenant = "acme" if n % 10 == 0 else ""
        for back in range(1, per + 1):
            at = NOW - back * every - timedelta(minutes=n % 60)
            kind = (n + back) % 100
            if kind < 7:
                row = ("failed", None, 5, at, at + timedelta(seconds=2), TRACEBACK)
            elif kind < 10:
                row = ("skipped", "misfire: missed by more than grace", 0, None, None, None)
            else:
                row = ("succeeded", None, 1, at, at + timedelta(seconds=1), None)
            status, reason, attempts, start, end, error = row
            worker = None if start is None else f"web-{n % 4}#4{n % 7}"
            yield (n, tenant, at, status, reason, attempts, at, start, end, worker, error, at)


def copy_rows(
    connection: psycopg.Connection[Any], table: str, columns: Sequence[str], rows: Iterable[Any]
) -> None:
    """COPY ``rows`` into ``table``'s ``columns`` on ``connection`` (not committed)."""
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns))
    )
    with connection.cursor().copy(statement) as copy:
        for row in rows:
            copy.write_row(row)


def fill(url: str, schedules: int, per: int, every: timedelta = timedelta(hours=1)) -> float:
    """COPY ``schedules`` schedules and ``per`` occurrences each, ``every`` apart, and ANALYZE;
    return the seconds it took."""
    started = time.perf_counter()
    with psycopg.connect(url) as connection:
        # The days the rows fall on, made first: a row finds its day's partition or fails.
        connection.execute(
            "SELECT oncely_add_partitions('oncely_occurrences', %s, %s)",
            (NOW - (per + 1) * every - timedelta(hours=1), NOW + timedelta(days=1)),
        )
        copy_rows(connection, "oncely_schedules", SCHEDULE_COLUMNS, schedule_rows(schedules, every))
        copy_rows(
            connection, "oncely_occurrences", OCCURRENCE_COLUMNS,
            occurrence_rows(schedules, per, every),
        )  # fmt: skip
        connection.execute(
            "SELECT setval(pg_get_serial_sequence('oncely_schedules', 'id'), %s)", (schedules,)
        )
        connection.commit()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("ANALYZE")
    return time.perf_counter() - started


def request(asgi: Any, path: str) -> tuple[int, float]:
    """GET ``path`` from ``asgi`` as a loopback client; return the status and milliseconds."""
    raw, _, query = path.partition("?")
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": raw, "raw_path": raw.encode(), "query_string": query.encode(),
        "root_path": "", "headers": [(b"host", b"127.0.0.1:8400")],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8400),
    }  # fmt: skip
    status = [0]

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]

    started = time.perf_counter()
    asyncio.run(asgi(scope, receive, send))
    return status[0], (time.perf_counter() - started) * 1000


def pages(schedules: int) -> list[tuple[str, str]]:
    n = schedules // 2 + 1  # not a multiple of ten: of no tenant
    key = f"remind:{n:07d}"
    occurrence = quote((NOW - timedelta(hours=3, minutes=n % 60)).isoformat())
    deep = f"remind:{schedules - 100:07d}"
    return [
        ("overview", "/"),
        ("schedules, first page", "/schedules"),
        ("schedules, a deep page", f"/schedules?after={quote(deep)}"),
        ("schedules, job filter", "/schedules?job=remind"),
        ("schedules, tenant filter", "/schedules?tenant=acme"),
        ("schedules, key prefix", f"/schedules?prefix={quote(key[:-2])}"),
        ("a schedule", f"/schedules/{quote(key, safe='')}"),
        ("an occurrence", f"/schedules/{quote(key, safe='')}/occurrences/{occurrence}"),
        ("workers", "/workers"),
        ("locks", "/locks"),
        ("drift", "/drift"),
        ("api: schedules", "/api/schedules"),
        ("api: a schedule", f"/api/schedules/{quote(key, safe='')}"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--per", type=int, default=10, help="occurrences per schedule")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--postgres", default=POSTGRES)
    options = parser.parse_args()
    with database(options.postgres) as url:
        app = build(url)
        app.migrate()
        seconds = fill(url, options.schedules, options.per)
        app.tick()  # a worker was here: beat's schedule saved, its code version seen
        asgi = dashboard(app)
        print(
            f"{options.schedules:,} schedules and {options.schedules * options.per:,} "
            f"occurrences stored with COPY in {seconds:.1f} s; medians of {options.runs} runs\n"
        )
        print("| page | median ms | slowest ms |")
        print("|---|---:|---:|")
        over = []
        for name, path in pages(options.schedules):
            status, _ = request(asgi, path)  # warm-up: templates compiled, plans cached
            if status != 200:
                raise SystemExit(f"{path} answered {status}")
            times = [request(asgi, path)[1] for _ in range(options.runs)]
            median = statistics.median(times)
            if median > TARGET_MS:
                over.append(name)
            print(f"| {name} | {median:.1f} | {max(times):.1f} |")
        app.close()
    print(f"\ntarget: every page under {TARGET_MS:.0f} ms; over it: {', '.join(over) or 'none'}")


if __name__ == "__main__":
    main()
