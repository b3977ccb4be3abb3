"""History at scale: what stays flat as stored occurrences grow, and what retention costs.

For each ``--scale`` (1m: one million stored occurrences; also 10m, 50m) and store, a new
database is migrated by oncely and filled: a tenth as many schedules as occurrences (one job,
daily, a tenth of them in tenant ``acme``), ten days of daily history each (nine in ten
succeeded, some failed with a traceback, some skipped), with COPY on PostgreSQL (bench/web.py's
rows, into the day partitions they fall on) and executemany in transactions of a million rows on
SQLite, then vacuumed, analyzed and checkpointed (PostgreSQL) or analyzed (SQLite). Measured,
each after one untimed warm-up, medians of ``--runs`` (3):

* reads that should stay flat: an idle tick (nothing due), one ``claim_due`` of 1,000 due
  occurrences (limit 1,000; put back to pending between runs, untimed), ``app.history(key)``
  (across every tenant) and a tenant view's ``history(key)``, ``app.explain(key)``
  of one schedule, and the first page of ``oncely jobs``
  (``app.schedules(limit=1000)``): milliseconds, and the ratio to the smallest scale;
* retention: one day of history (a tenth of the rows) pruned as housekeeping does, the store's
  ``prune(before, 1000)`` until a batch comes back short, against one bulk ``DELETE`` with the
  same predicate of the next day (as many rows), in alternating order. Per side: seconds, the
  longest single transaction (what a writer waiting on the rows could wait) and, on PostgreSQL,
  the most locks the other backends held, sampled every 10 ms from another connection;
* sizes before any delete: the occurrence table and each of its indexes, per million rows
  (``pg_relation_size``; SQLite's ``dbstat``, or page_count x page_size when it is missing).

A scale whose estimated disk need exceeds the free space is skipped with the reason printed.
``--write docs/performance.md`` replaces the page's "History at scale" section (`bench/report.py`
writes it at 1m in a whole report). Run from the project root::

    .venv/bin/python bench/history.py --scale 1m,10m --write docs/performance.md
    .venv/bin/python bench/history.py --scale 2k,4k --runs 1         # smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

_BENCH_DIR = Path(__file__).resolve().parent
if str(_BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(_BENCH_DIR))

import oncely  # noqa: E402
from _peers import harness  # noqa: E402
from peers import DEFAULT_SERVER  # noqa: E402
from web import (  # noqa: E402
    NOW,
    OCCURRENCE_COLUMNS,
    SCHEDULE_COLUMNS,
    build,
    copy_rows,
    occurrence_rows,
    schedule_rows,
)

STORES = ("postgres", "sqlite")
DAY = timedelta(days=1)
PER_SCHEDULE = 10
#: As the worker's housekeeping prunes: batches of this many rows.
PRUNE_BATCH = 1000
DUE = 1000
CLAIM_AT = NOW + timedelta(minutes=30)
SQLITE_CHUNK = 1_000_000
#: Before a scale is measured, free disk of this many bytes per occurrence is asked for (the
#: store, its WAL and the deletes' WAL); replaced by three times the size measured at the
#: smallest scale once there is one.
ASSUMED_BYTES = 1500
FINAL = "('succeeded', 'failed', 'skipped', 'abandoned', 'invalid')"
BULK_DELETE = (
    f"DELETE FROM oncely_occurrences WHERE status IN {FINAL} AND scheduled_for < {{b}}"
    " AND (finished_at < {b} OR finished_at IS NULL)"
)
PUT_BACK = (
    "UPDATE oncely_occurrences SET status = 'pending', attempts = 0, lease_owner = NULL,"
    " lease_expires_at = NULL, fence = NULL, started_at = NULL, worker = NULL"
    " WHERE scheduled_for = {at}"
)


def parse_scale(text: str) -> int:
    """``1m`` -> 1,000,000; ``2k`` -> 2,000."""
    units = {"k": 1_000, "m": 1_000_000}
    return int(float(text[:-1]) * units[text[-1].lower()]) if text[-1].isalpha() else int(text)


def micros(value: Any) -> Any:
    """SQLite's form of a time: microseconds since the epoch (anything else unchanged)."""
    if isinstance(value, datetime):
        return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return value


@contextmanager
def database(store: str, server: str, name: str) -> Iterator[str]:
    """A new, empty database of ``store`` named ``name`` (PostgreSQL); dropped afterwards."""
    if store == "sqlite":
        with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'oncely.db'}"
        return
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with harness.admin_connection(server) as admin:
        admin.execute(drop)
        admin.execute(create)
    try:
        yield harness.dsn_for(server, name)
    finally:
        with harness.admin_connection(server) as admin:
            admin.execute(drop)


def fill(store: str, url: str, occurrences: int) -> float:
    """Store ``occurrences`` (a tenth as many schedules, daily); return the seconds it took."""
    schedules = occurrences // PER_SCHEDULE
    started = time.perf_counter()
    if store == "postgres":
        with psycopg.connect(url) as connection:
            # The days the rows fall on, made first: a row finds its day's partition or fails.
            connection.execute(
                "SELECT oncely_add_partitions('oncely_occurrences', %s, %s)",
                (NOW - (PER_SCHEDULE + 1) * DAY, CLAIM_AT + DAY),
            )
            copy_rows(
                connection, "oncely_schedules", SCHEDULE_COLUMNS,
                schedule_rows(schedules, DAY, lead=timedelta(hours=1)),
            )  # fmt: skip
            copy_rows(
                connection, "oncely_occurrences", OCCURRENCE_COLUMNS,
                occurrence_rows(schedules, PER_SCHEDULE, DAY),
            )  # fmt: skip
            connection.execute(
                "SELECT setval(pg_get_serial_sequence('oncely_schedules', 'id'), %s)",
                (schedules,),
            )
        with psycopg.connect(url, autocommit=True) as connection:
            # Vacuumed and checkpointed, not only analyzed: autovacuum's first pass over tens of
            # millions of new rows, and the checkpoints of their WAL, ran during the reads at 50
            # million and doubled every one of them, the idle tick's included.
            connection.execute("VACUUM (ANALYZE)")
            connection.execute("CHECKPOINT")
        return time.perf_counter() - started
    tables = (
        ("oncely_schedules", SCHEDULE_COLUMNS,
         schedule_rows(schedules, DAY, lead=timedelta(hours=1))),
        ("oncely_occurrences", OCCURRENCE_COLUMNS,
         occurrence_rows(schedules, PER_SCHEDULE, DAY)),
    )  # fmt: skip
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        connection.execute("PRAGMA synchronous = NORMAL")
        for table, columns, rows in tables:
            marks = ",".join("?" * len(columns))
            insert = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
            for chunk in chunks((tuple(map(micros, row)) for row in rows), SQLITE_CHUNK):
                connection.executemany(insert, chunk)
                connection.commit()
        connection.execute("ANALYZE")
    connection.close()
    return time.perf_counter() - started


def chunks(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@contextmanager
def raw(store: str, url: str) -> Iterator[Callable[[str, Any], int]]:
    """``execute(template, value)``: runs ``template`` with ``{b}``/``{at}`` bound to ``value``
    on a connection of its own, commits, and returns the rows it changed."""
    if store == "postgres":
        with psycopg.connect(url) as pg:

            def execute_pg(template: str, value: Any) -> int:
                rows = pg.execute(template.format(b="%(v)s", at="%(v)s"), {"v": value}).rowcount
                pg.commit()
                return rows

            yield execute_pg
        return
    lite = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=60)
    try:

        def execute_lite(template: str, value: Any) -> int:
            rows = lite.execute(template.format(b=":v", at=":v"), {"v": micros(value)}).rowcount
            lite.commit()
            return rows

        yield execute_lite
    finally:
        lite.close()


def median_ms(call: Callable[[], Any], runs: int, after: Callable[[], Any] = lambda: None) -> float:
    """The median milliseconds of ``runs`` calls of ``call``, after one untimed; ``after`` runs
    untimed after each."""
    call()
    after()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
        after()
    return round(statistics.median(times), 3)


def reads(app: oncely.App, store: str, url: str, occurrences: int, runs: int) -> dict[str, float]:
    """The median ms of each read that should stay flat as history grows."""
    schedules = occurrences // PER_SCHEDULE
    key = f"remind:{schedules // 2 + 1:07d}"  # not a multiple of ten: of no tenant

    def idle_tick() -> None:
        report = app.tick()
        assert report.ran == 0, "nothing should be due"

    def claim() -> None:
        claimed = app.store.claim_due(
            owner="bench#1", lease=timedelta(minutes=5), limit=DUE, now=CLAIM_AT,
            jobs=["remind"], reclaim=[], serial=[],
        )  # fmt: skip
        assert len(claimed) == min(DUE, schedules), len(claimed)

    figures = {"idle tick": median_ms(idle_tick, runs)}
    due = [
        (n, "acme" if n % 10 == 0 else "", CLAIM_AT, "pending", 0, CLAIM_AT, NOW)
        for n in range(1, min(DUE, schedules) + 1)
    ]
    columns = ("schedule_id", "tenant", "scheduled_for", "status", "attempts", "run_after")
    with raw(store, url) as execute:
        if store == "postgres":
            with psycopg.connect(url) as connection:
                copy_rows(connection, "oncely_occurrences", (*columns, "created_at"), due)
        else:
            with sqlite3.connect(url.removeprefix("sqlite:///"), timeout=60) as connection:
                connection.executemany(
                    f"INSERT INTO oncely_occurrences ({', '.join(columns)}, created_at)"
                    " VALUES (?,?,?,?,?,?,?)",
                    [tuple(map(micros, row)) for row in due],
                )
            connection.close()
        figures[f"claim_due of {DUE:,}"] = median_ms(
            claim, runs, after=lambda: execute(PUT_BACK, CLAIM_AT)
        )
    figures["app.history(key)"] = median_ms(lambda: app.history(key), runs)
    tenant_key = f"remind:{schedules // 2 // 10 * 10 + 10:07d}"  # a multiple of ten: acme's
    acme = app.for_tenant("acme")
    figures["app.for_tenant(t).history(key)"] = median_ms(lambda: acme.history(tenant_key), runs)
    figures["app.explain(key)"] = median_ms(lambda: app.explain(key), runs)
    figures["oncely jobs, first page"] = median_ms(lambda: app.schedules(limit=1000), runs)
    return figures


class LockSampler:
    """Samples, every 10 ms from a connection of its own, how many locks the other backends of
    the database hold, and which modes."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.most = 0
        self.modes: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> LockSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as connection:
            while not self._stop.wait(0.01):  # oncely: allow ONC101 -- samples during one sweep
                rows = connection.execute(
                    "SELECT mode FROM pg_locks WHERE pid <> pg_backend_pid() AND granted"
                    " AND database = (SELECT oid FROM pg_database"
                    "                 WHERE datname = current_database())"
                ).fetchall()
                self.most = max(self.most, len(rows))
                self.modes.update(mode for (mode,) in rows)


def day_before(back: int) -> datetime:
    """The ``before`` that prunes history from ``back`` days ago and older."""
    return NOW - (back - 1) * DAY - DAY / 2


def sweep(app: oncely.App, before: datetime) -> dict[str, Any]:
    rows, batches, longest = 0, 0, 0.0
    started = time.perf_counter()
    while True:
        batch_started = time.perf_counter()
        pruned = app.store.prune(before, PRUNE_BATCH)
        longest = max(longest, time.perf_counter() - batch_started)
        rows, batches = rows + pruned, batches + 1
        if pruned < PRUNE_BATCH:
            break
    seconds = time.perf_counter() - started
    return {"rows": rows, "seconds": seconds, "batches": batches, "longest_ms": longest * 1000}


def bulk(execute: Callable[[str, Any], int], before: datetime) -> dict[str, Any]:
    started = time.perf_counter()
    rows = execute(BULK_DELETE, before)
    seconds = time.perf_counter() - started
    return {"rows": rows, "seconds": seconds, "batches": 1, "longest_ms": seconds * 1000}


def vacuum_after(url: str) -> float:
    """Seconds of the VACUUM that gives a bulk DELETE's dead rows back (PostgreSQL): work a
    dropped partition never leaves behind."""
    with psycopg.connect(url, autocommit=True) as connection:
        started = time.perf_counter()
        connection.execute("VACUUM oncely_occurrences")
        return time.perf_counter() - started


def retention(app: oncely.App, store: str, url: str, runs: int) -> dict[str, Any]:
    """Per run, the oldest day swept and the next deleted in bulk (the order alternating);
    the medians of each side, and every run."""
    measured: dict[str, list[dict[str, Any]]] = {"sweep": [], "bulk": []}
    with raw(store, url) as execute:
        for run in range(runs):
            oldest = PER_SCHEDULE - 2 * run
            sides = ("sweep", "bulk") if run % 2 == 0 else ("bulk", "sweep")
            for side, back in zip(sides, (oldest, oldest - 1), strict=True):
                before = day_before(back)
                if store == "postgres":
                    with LockSampler(url) as sampler:
                        figure = sweep(app, before) if side == "sweep" else bulk(execute, before)
                    figure |= {"most_locks": sampler.most, "modes": sorted(sampler.modes)}
                    if side == "bulk":
                        figure["vacuum_seconds"] = vacuum_after(url)
                else:
                    figure = sweep(app, before) if side == "sweep" else bulk(execute, before)
                measured[side].append(figure)
    document: dict[str, Any] = {"runs": measured}
    for side, figures in measured.items():
        document[side] = {
            "rows": int(statistics.median(f["rows"] for f in figures)),
            "seconds": round(statistics.median(f["seconds"] for f in figures), 3),
            "batches": int(statistics.median(f["batches"] for f in figures)),
            "longest_ms": round(statistics.median(f["longest_ms"] for f in figures), 1),
            "most_locks": max((f.get("most_locks", 0) for f in figures), default=0),
            "modes": sorted({m for f in figures for m in f.get("modes", [])}),
        }
        if any("vacuum_seconds" in f for f in figures):
            document[side]["vacuum_seconds"] = round(
                statistics.median(f["vacuum_seconds"] for f in figures), 3
            )
    document["ratio"] = round(document["sweep"]["seconds"] / document["bulk"]["seconds"], 2)
    return document


def sizes(store: str, url: str) -> dict[str, Any]:
    """Bytes of the occurrence table, its heap and each of its indexes; the database's."""
    if store == "postgres":
        # The table is partitioned by day: its sizes are its partitions' (the leaves of its
        # tree), and each index's its partitions' copies of it.
        with psycopg.connect(url) as connection:
            total, heap, indexes, whole = connection.execute(
                "SELECT sum(pg_total_relation_size(relid)), sum(pg_relation_size(relid)),"
                " sum(pg_indexes_size(relid)), pg_database_size(current_database())"
                " FROM pg_partition_tree('oncely_occurrences') WHERE isleaf"
            ).fetchone() or (0, 0, 0, 0)
            each = connection.execute(
                "SELECT c.relname, (SELECT sum(pg_relation_size(t.relid))"
                "   FROM pg_partition_tree(c.oid) t WHERE t.isleaf)"
                " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE i.indrelid = 'oncely_occurrences'::regclass ORDER BY c.relname"
            ).fetchall()
            total, heap, indexes = int(total or 0), int(heap or 0), int(indexes or 0)
            each = [(name, int(size or 0)) for name, size in each]
        return {"table": total, "heap": heap, "indexes": indexes, "database": whole,
                "each": dict(each), "method": "pg_relation_size"}  # fmt: skip
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        pages, page_size = (connection.execute(f"PRAGMA {p}").fetchone()[0]
                            for p in ("page_count", "page_size"))  # fmt: skip
        try:
            rows = connection.execute(
                "SELECT s.name, SUM(s.pgsize) FROM dbstat s JOIN sqlite_master m"
                " ON m.name = s.name WHERE m.tbl_name = 'oncely_occurrences' GROUP BY s.name"
                " ORDER BY s.name"
            ).fetchall()
        except sqlite3.OperationalError:  # built without dbstat
            rows = []
    connection.close()
    named = dict(rows)
    heap = named.pop("oncely_occurrences", 0)
    return {"table": heap + sum(named.values()) if rows else None, "heap": heap or None,
            "indexes": sum(named.values()) if rows else None, "database": pages * page_size,
            "each": named, "method": "dbstat" if rows else "page_count x page_size"}  # fmt: skip


def measure(store: str, server: str, name: str, occurrences: int, runs: int) -> dict[str, Any]:
    with database(store, server, name) as url:
        app = build(url)
        try:
            app.migrate()
            harness.say(f"[history] {store}: storing {occurrences:,} occurrences")
            seconds = fill(store, url, occurrences)
            app.tick()  # a worker was here: beat's schedule saved, its code version seen
            harness.say(f"[history] {store}: stored in {seconds:.0f} s; measuring")
            document = {
                "occurrences": occurrences, "schedules": occurrences // PER_SCHEDULE,
                "fill_s": round(seconds, 1), "sizes": sizes(store, url),
                "reads_ms": reads(app, store, url, occurrences, runs),
                "retention": retention(app, store, url, runs),
            }  # fmt: skip
        finally:
            app.close()
    return document


def free_bytes(store: str, server: str) -> int:
    """Free bytes where ``store`` keeps its files (PostgreSQL's data directory when it is on
    this machine and readable, else the temporary directory's disk)."""
    where = tempfile.gettempdir()
    if store == "postgres":
        try:
            with harness.admin_connection(server) as connection:
                row = connection.execute("SHOW data_directory").fetchone()
            if row and os.path.isdir(row[0]):
                where = row[0]
        except psycopg.Error:
            pass
    return shutil.disk_usage(where).free


def machine() -> str:
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()},"
        f" Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    )


def run(
    scales: list[str],
    stores: list[str],
    runs: int,
    server: str,
    prefix: str,
    most: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Every scale of ``scales`` on every store, except above a store's ``most`` scale."""
    document: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"), "runs": runs,
        "command": " ".join(["bench/history.py", *sys.argv[1:]]), "machine": machine(),
        "scales": [], "stores": {}, "skipped": [], "load": [round(os.getloadavg()[0], 2)],
    }  # fmt: skip
    if "postgres" in stores:
        document["machine"] += f", PostgreSQL {harness.server_version(server)}"
    for store in stores:
        by_scale: dict[str, Any] = {}
        for scale in scales:
            occurrences = parse_scale(scale)
            ceiling = (most or {}).get(store)
            if ceiling is not None and occurrences > parse_scale(ceiling):
                reason = f"above --most {store}={ceiling}"
                harness.say(f"[history] {store} {scale} skipped: {reason}")
                document["skipped"].append({"store": store, "scale": scale, "reason": reason})
                continue
            per_occurrence = ASSUMED_BYTES
            if by_scale:
                first = next(iter(by_scale.values()))
                per_occurrence = 3 * first["sizes"]["database"] // first["occurrences"]
            need, free = occurrences * per_occurrence, free_bytes(store, server)
            if need > free:
                reason = (f"needs about {need / 1e9:.0f} GB free disk, "
                          f"{free / 1e9:.0f} GB free")  # fmt: skip
                harness.say(f"[history] {store} {scale} skipped: {reason}")
                document["skipped"].append({"store": store, "scale": scale, "reason": reason})
                continue
            try:
                by_scale[scale] = measure(store, server, f"{prefix}_{scale}", occurrences, runs)
            except (AssertionError, oncely.OncelyError, psycopg.Error, sqlite3.Error) as exc:
                harness.say(f"[history] {store} {scale} failed: {exc!r}")
                document["skipped"].append({"store": store, "scale": scale, "reason": repr(exc)})
                continue
            by_scale[scale]["load"] = round(os.getloadavg()[0], 2)
            if scale not in document["scales"]:
                document["scales"].append(scale)
        document["stores"][store] = by_scale
    document["load"].append(round(os.getloadavg()[0], 2))
    return document


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", default="1m", help="comma-separated: 1m,10m,50m")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument(
        "--database-prefix",
        default=f"bench_history_{os.getpid()}",
        help="PostgreSQL databases: PREFIX_SCALE (default: bench_history_PID)",
    )
    parser.add_argument(
        "--most",
        nargs="+",
        default=[],
        metavar="STORE=SCALE",
        help="a store's largest scale, e.g. sqlite=10m (filling SQLite with 50m takes an hour)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    parser.add_argument("--write", type=Path, metavar="PAGE", help="update PAGE's section")
    args = parser.parse_args()
    if not 1 <= args.runs <= PER_SCHEDULE // 2:
        parser.error(f"--runs must be 1 to {PER_SCHEDULE // 2}: each run deletes two days")
    most = dict(item.split("=", 1) for item in args.most)
    document = run(args.scale.split(","), args.stores, args.runs, args.server,
                   args.database_prefix, most)  # fmt: skip
    from _report_page import history_section, replace_section

    section = history_section(document)
    print("\n".join(section))
    if args.json is not None:
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    if args.write is not None:
        replace_section(args.write, section)


if __name__ == "__main__":
    main()
