"""Migrations: numbered, forward-only, applied once, and equal to the checked-in schema dump."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from oncely import at
from oncely.arguments import FINAL_STATUSES
from oncely.model import Claim, Planned
from oncely.store import Store, open_store
from oncely.store.queries import migrations, queries

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HERE = Path(__file__).parent
UPDATE = os.environ.get("ONCELY_UPDATE_SCHEMA_DUMPS") == "1"


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database oncely has never touched, of each dialect."""
    if request.param == "sqlite":
        yield request.getfixturevalue("sqlite_url")
    else:
        yield request.getfixturevalue("empty_postgres_url")


def test_both_dialects_have_the_same_migrations() -> None:
    sqlite = [(m.version, m.name) for m in migrations("sqlite")]
    assert sqlite == [(m.version, m.name) for m in migrations("postgres")]
    assert sqlite[0] == (1, "initial")


def test_migrate_applies_every_version_once(empty_url: str) -> None:
    store = open_store(empty_url)
    latest = len(migrations(store.dialect))
    assert store.schema_version() == 0
    assert store.migrate(NOW) == list(range(1, latest + 1))
    assert store.schema_version() == latest
    assert store.migrate(NOW) == []  # a second start finds nothing to do
    assert store.schema_version() == latest


def test_concurrent_migrations_apply_each_version_exactly_once(empty_url: str) -> None:
    # Every instance of an app migrates on first start; a rolling deploy starts several at once.
    stores: list[Store] = [open_store(empty_url) for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    applied: list[list[int]] = []
    errors: list[BaseException] = []

    def start(store: Store) -> None:
        barrier.wait()
        try:
            applied.append(store.migrate(NOW))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    latest = len(migrations(stores[0].dialect))
    assert sorted(v for versions in applied for v in versions) == list(range(1, latest + 1))


def _sqlite_schema(url: str) -> str:
    path = url[len("sqlite:///") :]
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name"
        ).fetchall()
    connection.close()
    return "".join(f"-- {kind} {name}\n{sql};\n\n" for kind, name, sql in rows)


def _postgres_schema(url: str) -> str:
    dump = subprocess.run(
        [
            *("pg_dump", "--schema-only", "--no-owner", "--no-privileges", "--dbname", url),
            # The day partitions are named after the day the migration ran.
            *("--exclude-table", "oncely_occurrences_p2*"),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # Drop what varies by pg_dump version and run: comments, settings, psql meta-commands.
    kept = [
        line
        for line in dump.splitlines()
        if not line.startswith(("--", "SET ", "SELECT pg_catalog.", "\\"))
    ]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip() + "\n"


def test_migrations_equal_the_checked_in_schema(empty_url: str) -> None:
    store = open_store(empty_url)
    store.migrate(NOW)
    actual = _sqlite_schema(empty_url) if store.dialect == "sqlite" else _postgres_schema(empty_url)
    dump = HERE / f"schema_{store.dialect}.sql"
    if UPDATE:
        dump.write_text(actual)
    assert actual == dump.read_text(), (
        f"applying the migrations no longer gives {dump.name}. A schema change is a new numbered "
        "migration; once it is one, refresh the dump with ONCELY_UPDATE_SCHEMA_DUMPS=1 make test"
    )


def _at_version(monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    """Make this process's stores migrate only up to ``version``, as a previous release did."""
    import oncely.store.postgres
    import oncely.store.sqlite

    for module in (oncely.store.postgres, oncely.store.sqlite):
        monkeypatch.setattr(module, "migrations", lambda dialect: migrations(dialect)[:version])


def _defer(store: Store, key: str) -> None:
    instance = at(NOW).next_instance_after(NOW - timedelta(microseconds=1))
    assert instance is not None
    store.save_schedule(
        tenant=None, key=key, job="sync", origin="api", trigger=at(NOW), payload=None,
        next_run_at=None, now=NOW, occurrences=[Planned(instance, origin="defer")],
    )  # fmt: skip


def _claim(store: Store, now: datetime) -> Claim:
    (claimed,) = store.claim_due(
        owner="old#9", lease=timedelta(minutes=5), limit=1, now=now, jobs=["sync"],
        reclaim=["sync"], serial=[],
    )  # fmt: skip
    return claimed


def test_0010_moves_version_9_forward_under_its_workers(
    empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 0010 only creates a table: a version 9 worker's occurrences read as before, its claims in
    # flight do not hold the migration up, and what it booked (one attempt per row) is listed.
    with monkeypatch.context() as old:
        _at_version(old, 9)
        store = open_store(empty_url)
        assert store.migrate(NOW) == list(range(1, 10))
        for key in ("failed", "running"):
            _defer(store, key)
        failed = _claim(store, NOW)
        store.book_failure(failed, NOW, error="boom", retry_at=None, pause_after=None)
        running = _claim(store, NOW)
    holding = None
    if store.dialect == "postgres":
        # A version 9 claim holding its row locked (FOR UPDATE) while 0010 applies.
        holding = psycopg.connect(empty_url)
        holding.execute("SELECT id FROM oncely_occurrences FOR UPDATE").fetchall()
    migrated: list[list[int]] = []
    with monkeypatch.context() as new:
        # Up to 12: 0013 waits for open transactions by design (see the test of 0013).
        _at_version(new, 12)
        migrator = open_store(empty_url)
        applying = threading.Thread(target=lambda: migrated.append(migrator.migrate(NOW)))
        applying.start()
        applying.join(timeout=30)
        waited = applying.is_alive()
        if holding is not None:
            holding.close()
        applying.join()
        migrator.close()
    assert not waited, "0010 waited on a version 9 worker's claim"
    assert migrated == [[10, 11, 12]]
    (only,) = store.attempts(None, "failed", NOW) or []
    assert (only.number, only.outcome, only.worker, only.error) == (1, "failed", "old#9", "boom")
    (current,) = store.attempts(None, "running", NOW) or []
    assert (current.outcome, current.fence) == ("running", running.fence)
    # Booked after the migration by book_success, a statement 0010 left as version 9 has it.
    assert store.book_success([running], NOW) == [running]
    store.close()


def _waiting_migrations(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as watching:
        row = watching.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE query LIKE '%%DROP INDEX%%' AND wait_event_type = 'Lock'"
            " AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def test_0013_waits_for_open_transactions_without_stopping_version_12_workers(
    empty_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 0013 drops an index. A plain DROP INDEX queued for ACCESS EXCLUSIVE behind a transactional
    # handler's open transaction, and every claim and booking of every worker queued behind it
    # until that handler ended. Outside a transaction, CONCURRENTLY, it waits and blocks nobody.
    url = empty_postgres_url
    with monkeypatch.context() as old:
        _at_version(old, 12)
        store = open_store(url)
        assert store.migrate(NOW) == list(range(1, 13))
    _defer(store, "in-a-handler")
    held = _claim(store, NOW)
    handler = psycopg.connect(url)  # a transactional handler's transaction, open throughout
    handler.execute("SELECT id FROM oncely_occurrences FOR UPDATE").fetchall()
    migrated: list[list[int]] = []
    _at_version(monkeypatch, 13)  # 14 moves the rows into partitions: test_day_partitions
    migrator = open_store(url)
    applying = threading.Thread(target=lambda: migrated.append(migrator.migrate(NOW)))
    applying.start()
    try:
        deadline = time.monotonic() + 10
        while _waiting_migrations(url) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert applying.is_alive()
        assert _waiting_migrations(url) == 1

        worked: list[object] = []

        def version_12_worker() -> None:
            _defer(store, "meanwhile")
            claim = _claim(store, NOW + timedelta(seconds=1))
            worked.append(store.book_success([claim], NOW + timedelta(seconds=2)))
            worked.append(_prune_as_version_13(url, NOW - timedelta(days=1)))

        working = threading.Thread(target=version_12_worker)
        working.start()
        working.join(timeout=10)
        stalled = working.is_alive()
        handler.rollback()  # the handler ends: the migration may finish
        working.join()
        assert not stalled, "a version 12 worker waited on 0013 while it waited on a handler"
        assert len(worked) == 2
        assert worked[1] == 0  # nothing past retention yet
    finally:
        handler.close()
        applying.join(timeout=30)
    assert migrated == [[13]]
    assert migrator.schema_version() == 13
    assert store.book_success([held], NOW + timedelta(seconds=3)) == [held]
    assert _prune_as_version_13(url, NOW + timedelta(days=1)) == 2
    migrator.close()
    store.close()


def _prune_as_version_13(url: str, before: datetime) -> int:
    """Prune as workers up to schema version 13 did (0014's partitions drop whole days)."""
    with psycopg.connect(url) as connection:
        pruned = connection.execute(
            queries("postgres")["prune_occurrences"],
            {"before": before, "limit": 100, "statuses": list(FINAL_STATUSES)},
        ).rowcount
    return pruned


def test_migrations_outside_a_transaction_can_be_run_again() -> None:
    # One is committed statement by statement and recorded after the last: a process lost in
    # between left it unrecorded, and the next start runs each statement a second time.
    outside = [m for m in migrations("postgres") if not m.transactional]
    assert [m.version for m in outside] == [13, 14]  # 14 is run again in test_day_partitions
    only = outside[0]
    for statement in only.statements:
        assert re.search(r"\bIF (NOT )?EXISTS\b", statement), (only.name, statement)
    assert only.statements == [
        "DROP INDEX CONCURRENTLY IF EXISTS oncely_occurrences_prunable",
        "DROP INDEX CONCURRENTLY IF EXISTS oncely_occurrences_recent",
    ]
