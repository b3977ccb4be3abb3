"""The idle half of ``bench/engine.py``: what one tick costs when nothing is due.

N schedules are stored (``every(hours=1)``, next runs spread over the coming hours, none due),
the app ticks once to start (reconcile), then ticks are timed one by one, the sizes in turn. Every
named query a tick issues is counted by wrapping the store's query table, so the count is read
off the code that runs rather than asserted. On PostgreSQL the plans of the tick's queries at the
largest size are printed, to show each one reads an index.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

import oncely
from _peers import harness
from oncely.store.base import BEFORE_ANY

SPEC = json.dumps(oncely.every(hours=1).to_spec(), sort_keys=True)


class CountingQueries(dict[str, str]):
    """The store's named SQL, counting each name looked up (one lookup per statement sent)."""

    def __init__(self, queries: dict[str, str]) -> None:
        super().__init__(queries)
        self.used: Counter[str] = Counter()

    def __getitem__(self, name: str) -> str:
        self.used[name] += 1
        return super().__getitem__(name)


def store_schedules(url: str, count: int, now: datetime) -> None:
    """Insert ``count`` schedules of job ``idle``, none due, in one transaction."""
    rows = [
        ("", f"idle:{n}", "idle", "api", "every", SPEC, "null", "active",
         now + timedelta(hours=1, milliseconds=n), now, now)
        for n in range(count)
    ]  # fmt: skip
    columns = (
        "tenant, key, job, origin, trigger_kind, trigger_spec, payload, status, next_run_at, "
        "created_at, updated_at"
    )
    if url.startswith("sqlite:///"):
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        micros = [
            (*r[:8], *((t - epoch) // timedelta(microseconds=1) for t in r[8:])) for r in rows
        ]
        with sqlite3.connect(url[len("sqlite:///") :]) as connection:
            connection.executemany(
                f"INSERT INTO oncely_schedules ({columns}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", micros
            )
            connection.execute("ANALYZE")
        connection.close()
        return
    with psycopg.connect(url, autocommit=True) as connection:
        with (
            connection.cursor() as cursor,
            cursor.copy(f"COPY oncely_schedules ({columns}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
        connection.execute("ANALYZE")


@contextmanager
def idle_app(dialect: str, server: str, count: int, name: str) -> Iterator[Prepared]:
    """An app on a new database holding ``count`` schedules, started, its queries counted."""
    with harness.store_database(dialect, server, f"oncely_{name}") as url:
        app = oncely.App(url)

        @app.job()
        def idle(run: oncely.Run) -> None:
            raise AssertionError("nothing is due in this benchmark")

        app.migrate()
        store_schedules(url, count, app.now())
        app.tick()  # starts the app: reconciliation and first-use costs stay out of the figures
        store: Any = app.store
        counting = CountingQueries(store._sql)
        store._sql = counting
        try:
            yield Prepared(app, url, counting)
        finally:
            app.close()


@dataclass
class Prepared:
    app: oncely.App
    url: str
    counting: CountingQueries

    def tick_seconds(self) -> float:
        self.counting.used.clear()
        started = time.perf_counter()
        report = self.app.tick()
        elapsed = time.perf_counter() - started
        assert report.ran == 0, "nothing should be due"
        return elapsed


def explain(url: str, store: Any, now: datetime, used: Counter[str]) -> dict[str, str]:
    """The scans in the plan of each query an idle tick sends (PostgreSQL)."""
    params: dict[str, Any] = {
        "now": now, "due_by": now, "jobs": ["idle"], "limit": 100, "owner": "bench#0",
        "until": now, "exclude": "{}", "after": BEFORE_ANY,
    }  # fmt: skip
    plans = {}
    with psycopg.connect(url) as connection:
        connection.execute(dict.__getitem__(store._sql, "prefer_ordered_scans"))
        for name in sorted(used):
            sql = dict.__getitem__(store._sql, name)
            body = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
            if not body.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            rows = connection.execute(f"EXPLAIN {sql}", params).fetchall()
            scans = [str(r[0]).strip() for r in rows if "Scan" in str(r[0])]
            plans[name] = "; ".join(s.split("  (")[0].lstrip("-> ") for s in scans)
        connection.rollback()
    return plans


def run_idle(
    dialects: list[str], sizes: list[int], runs: int, ticks: int, server: str
) -> dict[str, Any]:
    """Median ms per idle tick for each dialect and size, the queries a tick sends, the ratio.

    All sizes of a dialect are prepared first, then ticked in turn (one tick of each size per
    round), so that whatever else the machine does falls on every size alike.
    """
    document: dict[str, Any] = {}
    for dialect in dialects:
        samples: dict[int, list[float]] = {count: [] for count in sizes}
        with ExitStack() as stack:
            prepared = {
                count: stack.enter_context(idle_app(dialect, server, count, f"idle_{count}"))
                for count in sizes
            }
            for _ in range(runs * ticks):
                for count in sizes:
                    samples[count].append(prepared[count].tick_seconds())
            by_size = {}
            for count in sizes:
                it = prepared[count]
                plans = (
                    explain(it.url, it.app.store, it.app.now(), it.counting.used)
                    if dialect == "postgres"
                    else {}
                )
                by_size[str(count)] = {
                    "tick_ms": round(statistics.median(samples[count]) * 1000, 3),
                    "queries": sum(it.counting.used.values()),
                    "names": dict(sorted(it.counting.used.items())),
                    "plans": plans,
                }
        smallest, largest = by_size[str(min(sizes))], by_size[str(max(sizes))]
        document[dialect] = {
            "sizes": by_size,
            "ticks_per_size": runs * ticks,
            "ratio": round(largest["tick_ms"] / smallest["tick_ms"], 2),
        }
    return document
