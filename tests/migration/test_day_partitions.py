"""Migration 0014 on PostgreSQL: occurrences move into day partitions while workers of the
previous version go on writing.

The workers of version 13 are its statements, as that version sends them (by id alone; attempts
without their occurrence's time), run from threads throughout the migration. Afterwards every row
is in the partitioned table exactly once, in its day's partition, as its last write left it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from oncely.store import open_store
from oncely.store.queries import migrations

NOW = datetime.now(UTC).replace(microsecond=0)
DAYS = 4
ROWS_PER_DAY = 5_000

# Version 13's statements (src/oncely/store/sql/postgres.sql at schema version 13), cut to what
# its workers write while a migration runs: new one-offs, claims, bookings, kept attempts, pruning.
V13_DEFER = """
WITH s AS (
    INSERT INTO oncely_schedules (key, job, origin, trigger_kind, trigger_spec, status,
        created_at, updated_at)
    VALUES (%(key)s, 'j', 'api', 'at', '{}'::jsonb, 'ended', now(), now())
    RETURNING id
)
INSERT INTO oncely_occurrences (schedule_id, scheduled_for, origin, status, run_after, created_at)
SELECT id, %(at)s, 'defer', 'pending', %(at)s, now() FROM s
"""
V13_CLAIM = """
WITH picked AS (
    SELECT o.id FROM oncely_occurrences o
    WHERE o.status IN ('pending', 'retrying') AND o.run_after <= now()
    ORDER BY o.run_after, o.id LIMIT 50
    FOR UPDATE OF o SKIP LOCKED
)
UPDATE oncely_occurrences o
SET status = 'running', attempts = o.attempts + 1, lease_owner = 'old#13',
    lease_expires_at = now() + interval '5 minutes', fence = nextval('oncely_fences'),
    started_at = now(), worker = 'old#13'
FROM picked WHERE o.id = picked.id
RETURNING o.id, o.fence
"""
V13_BOOK = """
UPDATE oncely_occurrences o SET status = 'succeeded', finished_at = now(), lease_owner = NULL,
    lease_expires_at = NULL
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS v(id, fence)
WHERE o.id = v.id AND o.status = 'running' AND o.fence = v.fence
"""
V13_RETRY = """
WITH booked AS (
    UPDATE oncely_occurrences SET status = 'retrying', run_after = now(), error = 'boom',
        finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
    WHERE id = %(id)s AND status = 'running' AND fence = %(fence)s
    RETURNING id, attempts, started_at, finished_at, worker, fence, error
)
INSERT INTO oncely_attempts (occurrence_id, attempt, outcome, started_at, finished_at, worker,
    fence, error)
SELECT id, attempts, 'failed', started_at, finished_at, worker, fence, error FROM booked
ON CONFLICT DO NOTHING
"""
V13_PRUNE = """
DELETE FROM oncely_occurrences WHERE id = ANY(ARRAY(
    SELECT id FROM oncely_occurrences
    WHERE status = 'succeeded' AND scheduled_for < %(before)s
    ORDER BY scheduled_for LIMIT 200 FOR UPDATE SKIP LOCKED))
"""


def _at_version(monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    import oncely.store.postgres

    monkeypatch.setattr(
        oncely.store.postgres, "migrations", lambda dialect: migrations(dialect)[:version]
    )


def _history(url: str, per_day: int = ROWS_PER_DAY) -> None:
    """DAYS days of one-offs ending today, ``per_day`` a day: most succeeded, a tenth pending
    now (due), five of those with an attempt kept."""
    with psycopg.connect(url) as connection:
        connection.execute(
            "INSERT INTO oncely_schedules (key, job, origin, trigger_kind, trigger_spec, status,"
            " created_at, updated_at)"
            " SELECT 'h' || g, 'j', 'api', 'at', '{}'::jsonb, 'ended', now(), now()"
            " FROM generate_series(1, %s) g",
            (DAYS * per_day,),
        )
        connection.execute(
            "INSERT INTO oncely_occurrences (schedule_id, scheduled_for, origin, status,"
            " run_after, finished_at, created_at)"
            " SELECT s.id, t.at, 'defer', CASE WHEN s.id %% 10 = 0 THEN 'pending'"
            " ELSE 'succeeded' END, t.at, CASE WHEN s.id %% 10 = 0 THEN NULL ELSE t.at END,"
            " now() FROM oncely_schedules s,"
            " LATERAL (SELECT %s::timestamptz - (s.id %% %s) * interval '1 day'"
            " - (s.id %% 977) * interval '1 minute' AS at) t",
            (NOW, DAYS),
        )
        connection.execute(
            "INSERT INTO oncely_attempts (occurrence_id, attempt, outcome, worker, fence, error)"
            " SELECT id, 1, 'failed', 'old#13', 1, 'boom' FROM oncely_occurrences"
            " WHERE status = 'pending' LIMIT 5"
        )


class Version13:
    """A worker of version 13, as threads sending its statements until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stop = threading.Event()
        self.deferred: list[str] = []
        self.booked: dict[int, int] = {}  # occurrence id -> fence booked
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._guarded, args=(work,))
            for work in (self._defers, self._claims, self._prunes)
        ]

    def __enter__(self) -> Version13:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def _guarded(self, work: Callable[[psycopg.Connection[Any]], None]) -> None:
        try:
            with psycopg.connect(self.url, autocommit=True) as connection:
                work(connection)
        except BaseException as exc:  # reported by the test, not lost in a thread
            self.errors.append(exc)

    def _defers(self, connection: psycopg.Connection[Any]) -> None:
        n = 0
        while not self.stop.is_set():
            key = f"during-{n}"
            connection.execute(V13_DEFER, {"key": key, "at": NOW - timedelta(seconds=n % 60)})
            self.deferred.append(key)
            n += 1

    def _claims(self, connection: psycopg.Connection[Any]) -> None:
        while not self.stop.is_set():
            claimed = connection.execute(V13_CLAIM).fetchall()
            if not claimed:
                continue
            failing, rest = claimed[0], claimed[1:]
            connection.execute(V13_RETRY, {"id": failing[0], "fence": failing[1]})
            ids = [row[0] for row in rest]
            fences = [row[1] for row in rest]
            connection.execute(V13_BOOK, {"ids": ids, "fences": fences})
            self.booked.update(zip(ids, fences, strict=True))

    def _prunes(self, connection: psycopg.Connection[Any]) -> None:
        while not self.stop.is_set():  # oncely: allow ONC101 -- version 13's sweeps, simulated
            connection.execute(V13_PRUNE, {"before": NOW - timedelta(days=DAYS - 1)})
            self.stop.wait(0.05)


def test_0014_moves_rows_into_day_partitions_while_version_13_workers_write(
    empty_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = empty_postgres_url
    with monkeypatch.context() as old:
        _at_version(old, 13)
        store = open_store(url)
        assert store.migrate(NOW) == list(range(1, 14))
        store.close()
    _history(url)
    migrated: list[list[int]] = []
    with Version13(url) as version_13:
        threading.Event().wait(0.5)  # the workers are at it before the migration begins
        migrator = open_store(url)
        migrated.append(migrator.migrate(NOW))
        threading.Event().wait(0.5)  # and go on after it
    assert not version_13.errors, version_13.errors
    assert migrated == [[14]]
    assert version_13.deferred
    assert version_13.booked
    with psycopg.connect(url) as connection:
        (kind,) = connection.execute(
            "SELECT relkind FROM pg_class WHERE oid = 'oncely_occurrences'::regclass"
        ).fetchone() or ("?",)
        assert kind == "p"
        outside = connection.execute(
            "SELECT count(*) FROM oncely_occurrences o WHERE tableoid::regclass::text"
            " <> 'oncely_occurrences_p' || to_char(o.scheduled_for AT TIME ZONE 'UTC', 'YYYYMMDD')"
        ).fetchone()
        assert outside == (0,)
        # Every one-off deferred, before or during the migration, is there once.
        keys = connection.execute(
            "SELECT s.key, count(o.id) FROM oncely_schedules s"
            " LEFT JOIN oncely_occurrences o ON o.schedule_id = s.id GROUP BY s.key"
        ).fetchall()
        counts = dict(keys)
        assert all(counts[key] == 1 for key in version_13.deferred)
        pruned = [key for key, count in counts.items() if count != 1]
        assert all(key.startswith("h") for key in pruned)  # pruned by version 13, nothing else
        # Each booking made while the rows moved is the row's state now.
        booked = connection.execute(
            "SELECT id, status, fence FROM oncely_occurrences WHERE id = ANY(%s)",
            (list(version_13.booked),),
        ).fetchall()
        assert {row[1] for row in booked} == {"succeeded"}
        assert {row[0]: row[2] for row in booked} == version_13.booked
    # Attempts version 13 kept after the switch have no time; the next sweep gives them theirs,
    # so that they go with their day.
    migrator.prune(NOW - timedelta(days=30), 100)
    with psycopg.connect(url) as connection:
        undated = connection.execute(
            "SELECT count(*) FROM oncely_attempts WHERE scheduled_for IS NULL"
        ).fetchone()
    assert undated == (0,)
    migrator.close()


FOURTEEN = next(m for m in migrations("postgres") if m.version == 14)


@pytest.mark.parametrize("lost_after", range(1, len(FOURTEEN.statements)))
def test_0014_run_again_after_a_process_lost_part_way_gives_the_same_table(
    empty_postgres_url: str, monkeypatch: pytest.MonkeyPatch, lost_after: int
) -> None:
    # Outside a transaction, 0014 is committed statement by statement and recorded after its
    # last: a process lost after any statement left it unrecorded, and the next start runs every
    # statement again.
    url = empty_postgres_url
    with monkeypatch.context() as old:
        _at_version(old, 13)
        store = open_store(url)
        store.migrate(NOW)
        store.close()
    _history(url, per_day=500)
    with psycopg.connect(url, autocommit=True) as lost:
        for statement in FOURTEEN.statements[:lost_after]:
            lost.execute(statement.encode())
    again = open_store(url)
    assert again.migrate(NOW) == [14]
    again.close()
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT count(*), count(DISTINCT (schedule_id, scheduled_for)),"
            " (SELECT relkind FROM pg_class WHERE oid = 'oncely_occurrences'::regclass),"
            " (SELECT count(*) FROM pg_class WHERE relname LIKE 'oncely\\_occurrences\\_%%'"
            "  AND relname NOT LIKE 'oncely\\_occurrences\\_p2%%'"
            "  AND relkind IN ('r', 'p'))"
            " FROM oncely_occurrences"
        ).fetchone()
    assert rows == (DAYS * 500, DAYS * 500, "p", 0)
