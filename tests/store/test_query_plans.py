"""The claim queries read the occurrences' indexes first, whatever the tables' statistics say.

Both failures these guard against were seen in bench/engine.py: SQLite, with statistics showing
many schedules and few occurrences, scanned every schedule on every tick; PostgreSQL, right after a
burst (statistics still saying "nearly empty"), read and sorted the whole backlog on every claim.

Pruning reads an index by time, oldest first (on PostgreSQL oncely_occurrences_history, tenant by
tenant; on SQLite the partial index of finished occurrences, oncely_occurrences_prunable), never
sorts, and deletes by primary key: without one a sweep read the occurrence table until it had its
batch, 61 ms at 300,000 rows and growing with history. The sweeps' one index serves
their listing and their pruning.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from oncely import at, every
from oncely.arguments import FINAL_STATUSES
from oncely.model import Planned
from oncely.store import open_store
from oncely.store.postgres import PostgresStore
from oncely.store.queries import queries

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
# On PostgreSQL each day's partition has its own copy of each index, named by PostgreSQL after
# the partition and the columns.
_PARTITION_INDEX = {
    "oncely_occurrences_pkey": "pkey",
    "oncely_occurrences_claimable": "run_after_id_idx",
    "oncely_occurrences_history": "tenant_scheduled_for_idx",
    "oncely_occurrences_leased": "lease_expires_at_idx",
}
CLAIMS = ("claim_expired", "claim_ready", "claim_free", "expired_of_jobs", "reclaimable")
SPEC = json.dumps(every(hours=1).to_spec(), sort_keys=True)


def _store_postgres_schedules(
    connection: psycopg.Connection[Any], count: int, first_run: datetime | None = None
) -> None:
    """``count`` schedules of job ``j``, keys ``k1``..., next runs 1 ms apart from ``first_run``
    (none: no next run)."""
    connection.execute(
        "INSERT INTO oncely_schedules (key, job, origin, trigger_kind, trigger_spec, next_run_at,"
        " created_at, updated_at) SELECT 'k' || g, 'j', 'api', 'every', %s::jsonb,"
        " %s::timestamptz + g * interval '1 ms', now(), now() FROM generate_series(1, %s) g",
        (SPEC, first_run, count),
    )


def _migrated_sqlite(url: str) -> str:
    """The path of the SQLite database at ``url``, migrated to the latest schema."""
    store = open_store(url)
    store.migrate(NOW)
    store.close()
    return url[len("sqlite:///") :]


def _scans(plan: str, index: str) -> bool:
    """Whether ``plan`` reads ``index`` (or the copy of it of a day's partition)."""
    child = _PARTITION_INDEX.get(index)
    names = index if child is None else f"(?:{index}|oncely_occurrences_p\\d{{8}}_{child})"
    return re.search(rf"Scan(?: Backward)? using {names}\b", plan) is not None


def _sorts(plan: str) -> bool:
    """Whether ``plan`` has a sort step (a merge of sorted inputs, "Sort Key" alone, is none)."""
    return re.search(r"(?:^|->)\s*(?:Incremental )?Sort\s+\(", plan, re.MULTILINE) is not None


def test_sqlite_claims_start_from_the_occurrences(sqlite_url: str) -> None:
    path = _migrated_sqlite(sqlite_url)
    with sqlite3.connect(path) as connection:
        connection.executemany(
            "INSERT INTO oncely_schedules (tenant, key, job, origin, trigger_kind, trigger_spec,"
            " next_run_at, created_at, updated_at) VALUES ('', ?, 'j', 'api', 'every', ?, 1, 0, 0)",
            [(f"k{n}", SPEC) for n in range(2000)],
        )
        connection.execute("ANALYZE")
        params = {"now": 0, "due_by": 0, "jobs": '["j"]', "limit": 10, "exclude": "[]"}
        for name in CLAIMS:
            plan = [
                row[3]
                for row in connection.execute(
                    f"EXPLAIN QUERY PLAN {queries('sqlite')[name]}", params
                )
            ]
            assert plan[0].startswith(("SEARCH o USING INDEX", "SCAN o USING INDEX")), (name, plan)
    connection.close()


def _statistics(schedules: int, occurrences: int) -> list[tuple[str, str, str]]:
    """sqlite_stat1 of a database of ``occurrences`` (a tenth of them per tenant) of
    ``schedules`` (two tenants), analyzed while nothing was pending or running, as
    bench/history.py fills it: the partial indexes have no rows."""
    n, hourly, m = occurrences, occurrences // 600, schedules
    return [
        ("oncely_schedules", "oncely_schedules_due", f"{m} {m // 60}"),
        ("oncely_schedules", "sqlite_autoindex_oncely_schedules_1", f"{m} {m // 2} 1"),
        ("oncely_occurrences", "oncely_occurrences_prunable", f"{n} {hourly}"),
        ("oncely_occurrences", "oncely_occurrences_recent", f"{n} {hourly} 1"),
        ("oncely_occurrences", "oncely_occurrences_history", f"{n} {n // 2} {hourly}"),
        ("oncely_occurrences", "sqlite_autoindex_oncely_occurrences_1", f"{n} {n // m} 1"),
    ]  # fmt: skip


@pytest.mark.parametrize("schedules", [1_000, 100_000, 1_000_000])
def test_sqlite_reads_no_table_whole_to_join_what_it_found(sqlite_url: str, schedules: int) -> None:
    # With such statistics the planner took each partial index's range for a share of the whole
    # table, more rows than there are schedules, and built a Bloom filter of every schedule
    # before the join: a claim of 1,000 took 97 ms at 1 M schedules instead of 0.6 ms. One key's
    # history, from a recursive query it cannot count, filtered every schedule or occurrence.
    path = _migrated_sqlite(sqlite_url)
    with sqlite3.connect(path) as connection:
        connection.execute("ANALYZE")
        connection.execute("DELETE FROM sqlite_stat1")
        connection.executemany(
            "INSERT INTO sqlite_stat1 VALUES (?, ?, ?)", _statistics(schedules, schedules * 10)
        )
    connection.close()
    sql = queries("sqlite")
    bloomed = {}
    with sqlite3.connect(path) as connection:  # statistics are read when a connection opens
        for name, statement in sql.items():
            params = dict.fromkeys(re.findall(r":(\w+)", statement), 0)
            params |= {k: '["j"]' for k in ("jobs", "exclude", "ids", "statuses") if k in params}
            plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
            if any("BLOOM FILTER" in step for step in plan):
                bloomed[name] = plan
    connection.close()
    assert not bloomed, sorted(bloomed)


def test_postgres_claims_read_the_claimable_index_in_order(postgres_url: str) -> None:
    sql = queries("postgres")
    with psycopg.connect(postgres_url) as connection:
        _store_postgres_schedules(connection, 3000)
        connection.execute("ANALYZE")  # statistics taken before the burst, as in production
        connection.execute(
            "INSERT INTO oncely_occurrences (schedule_id, scheduled_for, status, run_after,"
            " created_at) SELECT id, now() - interval '1 s', 'pending', now() - interval '1 s',"
            " now() FROM oncely_schedules"
        )
        connection.execute(sql["prefer_ordered_scans"])
        params = {
            "now": NOW + timedelta(days=1), "due_by": NOW + timedelta(days=1), "jobs": ["j"],
            "limit": 10, "owner": "h#1", "until": NOW, "exclude": "{1,2}",
        }  # fmt: skip
        for name in ("claim_ready", "claim_free"):
            plan = "\n".join(
                str(row[0]) for row in connection.execute(f"EXPLAIN {sql[name]}", params)
            )
            assert _scans(plan, "oncely_occurrences_claimable"), (name, plan)
            assert not _sorts(plan), (name, plan)
        connection.rollback()


def test_postgres_claim_free_updates_what_it_picked_by_primary_key(postgres_url: str) -> None:
    """With statistics that know the backlog, the planner joined the picked ids to a hash of the
    whole occurrence table: every claim of a burst read all 20,000 rows, 9 of its 32 ms."""
    sql = queries("postgres")
    with psycopg.connect(postgres_url) as connection:
        _store_postgres_schedules(connection, 20_000)
        connection.execute(
            "INSERT INTO oncely_occurrences (schedule_id, scheduled_for, status, run_after,"
            " created_at) SELECT id, now() - interval '1 s', 'pending', now() - interval '1 s',"
            " now() FROM oncely_schedules"
        )
        connection.execute("ANALYZE")
        connection.execute(sql["prefer_ordered_scans"])
        later = datetime.now(UTC) + timedelta(minutes=1)  # every row is due
        params = {
            "now": later, "due_by": later, "jobs": ["j"], "limit": 1000, "owner": "h#1",
            "until": later,
        }  # fmt: skip
        for mode in ("force_custom_plan", "force_generic_plan"):
            connection.execute(f"SET LOCAL plan_cache_mode = {mode}")
            plan = "\n".join(
                str(row[0]) for row in connection.execute(f"EXPLAIN {sql['claim_free']}", params)
            )
            # An empty partition (a day ahead) may be read whole: it has nothing to read.
            today = f"oncely_occurrences_p{datetime.now(UTC):%Y%m%d} "
            assert f"Seq Scan on {today}" not in plan, (mode, plan)
            assert "Seq Scan on oncely_occurrences " not in plan, (mode, plan)
            assert _scans(plan, "oncely_occurrences_pkey"), (mode, plan)
        connection.rollback()


def test_sqlite_housekeeping_reads_what_it_needs(sqlite_url: str) -> None:
    path = _migrated_sqlite(sqlite_url)
    sql = queries("sqlite")
    with sqlite3.connect(path) as connection:
        connection.executemany(
            "INSERT INTO oncely_schedules (tenant, key, job, origin, trigger_kind, trigger_spec,"
            " next_run_at, created_at, updated_at) VALUES ('', ?, 'j', 'api', 'every', ?, 1, 0, 0)",
            [(f"k{n}", SPEC) for n in range(2000)],
        )
        connection.execute(
            "INSERT INTO oncely_occurrences (schedule_id, scheduled_for, status, run_after,"
            " finished_at, created_at) SELECT id, 5, 'succeeded', 5, 6, 0 FROM oncely_schedules"
        )
        connection.executemany(
            "INSERT INTO oncely_sweeps (worker, started_at, finished_at, pruned, reclaimed,"
            " abandoned) VALUES ('w', ?, ?, 0, 0, 0)",
            [(n, n) for n in range(5000)],
        )
        connection.execute("ANALYZE")
        params = {"before": 10, "limit": 100, "statuses": json.dumps(FINAL_STATUSES)}

        def plan(name: str) -> list[str]:
            return [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql[name]}", params)]

        pruning = plan("prune_occurrences")
        assert "SEARCH oncely_occurrences USING INTEGER PRIMARY KEY (rowid=?)" in pruning, pruning
        assert any("INDEX oncely_occurrences_prunable" in step for step in pruning), pruning
        assert not any("TEMP B-TREE" in step for step in pruning), pruning
        assert plan("prune_sweeps") == [
            "SEARCH oncely_sweeps USING INDEX oncely_sweeps_finished (finished_at<?)"
        ]
        assert plan("select_sweeps") == ["SCAN oncely_sweeps USING INDEX oncely_sweeps_finished"]
    connection.close()


def test_postgres_housekeeping_reads_what_it_needs(postgres_url: str) -> None:
    sql = queries("postgres")
    with psycopg.connect(postgres_url) as connection:
        _store_postgres_schedules(connection, 3000)
        connection.execute(
            "INSERT INTO oncely_occurrences (schedule_id, scheduled_for, status, run_after,"
            " finished_at, created_at) SELECT id, now(), 'succeeded', now(), now(), now()"
            " FROM oncely_schedules"
        )
        connection.execute(
            "INSERT INTO oncely_sweeps (worker, started_at, finished_at, pruned, reclaimed,"
            " abandoned) SELECT 'w', now(), now() - g * interval '1 min', 0, 0, 0"
            " FROM generate_series(1, 5000) g"
        )
        connection.execute("ANALYZE")

        def plan(name: str, before: datetime) -> str:
            params = {"before": before, "limit": 500, "statuses": list(FINAL_STATUSES)}
            rows = connection.execute(f"EXPLAIN {sql[name]}", params)
            return "\n".join(str(row[0]) for row in rows)

        # a batch of a sixth of the table: still no second pass over it, and no sort
        pruning = plan("prune_occurrences", NOW + timedelta(days=3650))
        assert _scans(pruning, "oncely_occurrences_pkey"), pruning
        assert _scans(pruning, "oncely_occurrences_history"), pruning
        assert "Limit" in pruning, pruning
        assert not _sorts(pruning), pruning
        assert "Hash" not in pruning, pruning
        sweeps = plan("prune_sweeps", NOW - timedelta(days=3650))
        assert "oncely_sweeps_finished" in sweeps, sweeps
        listing = plan("select_sweeps", NOW)
        assert "Index Scan Backward using oncely_sweeps_finished" in listing, listing
        assert not _sorts(listing), listing
        connection.rollback()


def test_postgres_history_of_every_tenant_reads_each_tenant_newest_first(
    postgres_url: str,
) -> None:
    # No index by time alone (0013): across tenants, history merges each tenant's newest rows,
    # read through oncely_occurrences_history. A plan that read the table whole and sorted it
    # took over a second for the latest 20 of a million.
    statement = queries("postgres")["select_history"]
    with psycopg.connect(postgres_url) as connection:
        _store_postgres_schedules(connection, 200)
        connection.execute(
            "INSERT INTO oncely_occurrences (schedule_id, tenant, scheduled_for, status, run_after,"
            " finished_at, created_at) SELECT s.id, 't' || (g % 3), now() - g * interval '1 s',"
            " 'succeeded', now(), now(), now() FROM oncely_schedules s, generate_series(1, 300) g"
        )
        connection.execute("ANALYZE")
        params = {"all_tenants": True, "tenant": "", "key": None, "since": None, "until": None,
                  "status": None, "limit": 20}  # fmt: skip
        plan = "\n".join(str(row[0]) for row in connection.execute(f"EXPLAIN {statement}", params))
        connection.rollback()
    assert _scans(plan, "oncely_occurrences_history"), plan
    assert "Seq Scan on oncely_occurrences" not in plan, plan
    assert "Bitmap" not in plan, plan


def test_postgres_a_keys_history_of_every_tenant_reads_no_table_whole(postgres_url: str) -> None:
    # No index has the key alone. Walking every tenant's history newest first until the key's
    # rows turned up took 26 ms at 10 M occurrences (and grew with them); reading the schedules
    # whole for the key, 6.5 ms at 100,000. The tenants are skipped through instead.
    statement = queries("postgres")["select_history_of_key"]
    with psycopg.connect(postgres_url) as connection:
        connection.execute(
            "INSERT INTO oncely_schedules (tenant, key, job, origin, trigger_kind, trigger_spec,"
            " created_at, updated_at) SELECT 't' || (g %% 3), 'k' || g / 3, 'j', 'api', 'every',"
            " %s::jsonb, now(), now() FROM generate_series(1, 30000) g",
            (SPEC,),
        )
        connection.execute(
            "INSERT INTO oncely_occurrences (schedule_id, tenant, scheduled_for, status, run_after,"
            " finished_at, created_at) SELECT s.id, s.tenant,"
            # Today's partition: the database has none before today, and "now() - g hours" failed
            # every day from midnight to 10:00 UTC.
            " date_trunc('day', now()) + g * interval '1 h',"
            " 'succeeded', now(), now(), now() FROM oncely_schedules s, generate_series(1, 10) g"
        )
        connection.execute("ANALYZE")
        params = {"all_tenants": True, "tenant": "", "key": "k7", "since": None, "until": None,
                  "status": None, "limit": 100}  # fmt: skip
        plan = "\n".join(str(row[0]) for row in connection.execute(f"EXPLAIN {statement}", params))
        found = connection.execute(statement, params).fetchall()
        of_one = connection.execute(statement, {**params, "all_tenants": False, "tenant": "t1"})
        assert {row[1] for row in of_one.fetchall()} == {"t1"}
        connection.rollback()
    assert len(found) == 30  # 3 tenants, 10 each
    # (the days ahead have partitions with nothing in them: read whole, they cost nothing)
    assert not re.search(r"Seq Scan on \S+ \w+\s+\(cost=(?!0\.00\.\.0\.00 )", plan), plan
    assert _scans(plan, "oncely_schedules_tenant_key_key"), plan
    assert "Index Cond: (key = " not in plan, plan  # the whole index, for want of a tenant
    assert not _scans(plan, "oncely_occurrences_history"), plan


def test_postgres_bookings_are_never_prepared_statements(postgres_url: str) -> None:
    # Statistics taken while nothing ran say "no running rows"; the generic plan of a prepared
    # booking then read every running row once per booked one (10 ms for 30 of 1,100 running).
    store = open_store(postgres_url)
    try:
        store.migrate(NOW)
        instance = at(NOW).next_instance_after(NOW - timedelta(microseconds=1))
        assert instance is not None
        for n in range(8):
            store.save_schedule(
                tenant=None, key=f"k{n}", job="j", origin="api", trigger=at(NOW), payload=None,
                next_run_at=None, now=NOW, occurrences=[Planned(instance, origin="defer")],
            )  # fmt: skip
        for _ in range(8):  # more runs than psycopg's prepare threshold (5)
            (claimed,) = store.claim_due(
                owner="h#1", lease=timedelta(minutes=5), limit=1, now=NOW, jobs=["j"],
                reclaim=["j"], serial=[],
            )  # fmt: skip
            assert store.book_success([claimed], NOW) == [claimed]
        # The pool hands its connections out in turn: every one it has is looked at.
        with store._connect() as first, store._connect() as second:  # type: ignore[attr-defined]
            prepared = [
                str(row["statement"])
                for connection in (first, second)
                for row in connection.execute("SELECT statement FROM pg_prepared_statements")
            ]
    finally:
        store.close()
    assert any("nextval('oncely_fences')" in text for text in prepared), prepared  # claims are
    assert not any("'succeeded'" in text for text in prepared), prepared


def _join_filtered(node: dict[str, Any]) -> int:
    """Rows a plan's joins read and threw away, in ``node`` and below it."""
    below = sum(_join_filtered(child) for child in node.get("Plans", []))
    return int(node.get("Rows Removed by Join Filter", 0)) + below


@pytest.mark.parametrize("statistics", ["taken before the burst", "none yet"])
@pytest.mark.parametrize("count", [20, 150])
def test_postgres_statements_joined_to_claims_read_each_row_once(
    postgres_url: str, statistics: str, count: int
) -> None:
    # With either, the planner took the running rows for a handful and read all of them once per
    # claim in the arrays: a booking of 60 of 4,000 running read 240,000 rows and took 100 ms,
    # and a worker draining a burst spent 4 s of 6 in its loop waiting on its bookings.
    store = open_store(postgres_url)
    assert isinstance(store, PostgresStore)
    try:
        store.migrate(NOW)
        now = datetime.now(UTC)
        with psycopg.connect(postgres_url) as connection:
            _store_postgres_schedules(connection, 20_000)
            if statistics == "taken before the burst":
                connection.execute("ANALYZE")
            connection.execute(
                "INSERT INTO oncely_occurrences (schedule_id, scheduled_for, status, run_after,"
                " created_at) SELECT id, %s, 'pending', %s, %s FROM oncely_schedules",
                (now, now, now),
            )
        lease = timedelta(minutes=5)
        claims = store.claim_due(
            owner="h#1", lease=lease, limit=4000, now=now, jobs=["j"], reclaim=[], serial=[]
        )
        assert len(claims) == 4000
        booked = claims[:count]
        params = {
            "book_success": {**store._claims(booked), "now": now},
            "release_claims": store._claims(booked),
            "mark_left_running": {**store._claims(booked), "reason": "r"},
            "extend_leases": store._leases_until([(c, now + lease) for c in booked]),
        }
        # Each statement as the store runs it (with what it runs first), explained.
        sql = store._sql
        store._sql = {
            **sql,
            **{name: f"EXPLAIN (ANALYZE, FORMAT JSON) {sql[name]}" for name in params},
        }
        wasted = {}
        for name, values in params.items():
            with store._connect() as connection:
                (row,) = store._rows(connection, name, values)
                wasted[name] = _join_filtered(row["QUERY PLAN"][0]["Plan"])
                connection.rollback()
    finally:
        store.close()
    assert all(thrown <= count for thrown in wasted.values()), wasted


def test_postgres_plans_the_due_schedules_query_once_however_many_schedules_there_are(
    postgres_url: str,
) -> None:
    # With LIMIT bound as a parameter the generic plan was costed for a tenth of the table, and
    # from some tens of thousands of schedules on PostgreSQL planned every execution anew: an
    # idle tick took 0.68 ms at 100,000 schedules against 0.59 ms at 1,000 (bench/engine.py).
    store = open_store(postgres_url)
    try:
        store.migrate(NOW)
        with psycopg.connect(postgres_url) as connection:
            _store_postgres_schedules(connection, 100_000, NOW + timedelta(hours=1))
            connection.execute("ANALYZE oncely_schedules")
        for _ in range(40):  # the pool takes turns: each connection gets past the threshold (5)
            assert store.due_schedules(NOW, ["j"], 100) == []
        with store._connect() as first, store._connect() as second:  # type: ignore[attr-defined]
            plans = [
                (row["generic_plans"], row["custom_plans"])
                for connection in (first, second)
                for row in connection.execute(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                    " WHERE statement LIKE '%ORDER BY next_run_at%'"
                )
            ]
    finally:
        store.close()
    assert plans, "the due schedules query was not prepared"
    assert all(generic > 0 for generic, _ in plans), plans


def test_a_keys_history_is_read_through_its_schedules_on_sqlite(sqlite_url: str) -> None:
    """One key's history: a scan of all history newest first took 21 s at 10 M occurrences."""
    path = _migrated_sqlite(sqlite_url)
    params = {"key": "k", "all_tenants": 1, "tenant": "", "since": None, "until": None}
    with sqlite3.connect(path) as connection:
        sql = queries("sqlite")["select_history_of_key"]
        plan = [
            row[3]
            for row in connection.execute(
                f"EXPLAIN QUERY PLAN {sql}", {**params, "status": None, "limit": 100}
            )
        ]
    connection.close()
    # and no scan of the (tenant, key) index for the key: it grew with the schedules
    assert not any(step.startswith("SCAN") and "oncely_" in step for step in plan), plan
    assert any(step.endswith("(tenant=? AND key=?)") for step in plan), plan
    assert any(step.startswith("SEARCH o USING INDEX") for step in plan), plan


def _running_rows(connection: Any, dialect: str, lease_until: Any) -> None:
    """A running occurrence under a live lease for every schedule: held claims."""
    fields = "(schedule_id, scheduled_for, status, run_after, created_at, lease_owner, " \
        "lease_expires_at, fence, attempts)"  # fmt: skip
    if dialect == "sqlite":
        connection.execute(
            f"INSERT INTO oncely_occurrences {fields} SELECT id, 5, 'running', 5, 0, 'w', ?, 1, 1"
            " FROM oncely_schedules",
            (lease_until,),
        )
    else:
        connection.execute(
            f"INSERT INTO oncely_occurrences {fields} SELECT id, now(), 'running', now(), now(),"
            " 'w', %s, 1, 1 FROM oncely_schedules",
            (lease_until,),
        )


def test_sqlite_claim_of_expired_leases_reads_only_expired_ones(sqlite_url: str) -> None:
    # Every claim asks for expired leases; with the OR of a missing lease it scanned the index of
    # every running row (1.0-1.4 M entries read per 20,000 jobs with 1,000 claims held).
    with sqlite3.connect(_migrated_sqlite(sqlite_url)) as connection:
        connection.executemany(
            "INSERT INTO oncely_schedules (tenant, key, job, origin, trigger_kind, trigger_spec,"
            " next_run_at, created_at, updated_at) VALUES ('', ?, 'j', 'api', 'every', ?, 1, 0, 0)",
            [(f"k{n}", SPEC) for n in range(1000)],
        )
        _running_rows(connection, "sqlite", 10**12)
        connection.execute("ANALYZE")
        params = {"now": 0, "jobs": '["j"]', "limit": 10}
        statement = queries("sqlite")["claim_expired"]
        plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
    connection.close()
    assert plan[0] == "SEARCH o USING INDEX oncely_occurrences_leased (lease_expires_at<?)", plan


def test_postgres_claim_of_expired_leases_reads_only_expired_ones(postgres_url: str) -> None:
    # The claim is a prepared statement: its generic plan knows nothing of `now`, so the bound
    # must be in the index condition, not a filter over every running row's entry.
    statement = queries("postgres")["claim_expired"]
    with psycopg.connect(postgres_url) as connection:
        _store_postgres_schedules(connection, 1000)
        _running_rows(connection, "postgres", NOW + timedelta(days=3650))
        connection.execute("ANALYZE")
        connection.execute("SET plan_cache_mode = force_generic_plan")
        for name, number in (("now", 1), ("jobs", 2), ("limit", 3)):
            statement = statement.replace(f"%({name})s", f"${number}")
        connection.execute(f"PREPARE claim(timestamptz, text[], integer) AS {statement}")
        rows = connection.execute(
            f"EXPLAIN (ANALYZE) EXECUTE claim('{NOW.isoformat()}', '{{j}}', 10)"
        )
        plan = "\n".join(str(row[0]) for row in rows)
        connection.rollback()
    assert "Index Cond: (lease_expires_at <= $1)" in plan, plan
    assert "Rows Removed by Filter" not in plan, plan


def test_the_schedules_waiting_for_a_person_are_read_from_their_own_index(
    sqlite_url: str, postgres_url: str
) -> None:
    """/metrics counts them on every scrape of every process: at 100,000 schedules, a few of them
    paused, reading the schedule table would cost each scrape the whole table."""
    with psycopg.connect(postgres_url) as connection:
        _store_postgres_schedules(connection, 100_000, NOW)
        connection.execute("UPDATE oncely_schedules SET paused = true WHERE id % 1000 = 0")
        connection.execute("ANALYZE")
        plan = "\n".join(
            row[0]
            for row in connection.execute(
                f"EXPLAIN {queries('postgres')['schedule_states']}"
            ).fetchall()
        )
    assert "oncely_schedules_stopped" in plan, plan
    assert "Seq Scan" not in plan, plan
    with sqlite3.connect(_migrated_sqlite(sqlite_url)) as lite:
        lite.executemany(
            "INSERT INTO oncely_schedules (tenant, key, job, origin, trigger_kind, trigger_spec,"
            " next_run_at, paused, created_at, updated_at)"
            " VALUES ('', ?, 'j', 'api', 'every', ?, 1, ?, 0, 0)",
            [(f"k{n}", SPEC, int(n % 1000 == 0)) for n in range(20_000)],
        )
        lite.execute("ANALYZE")
        plan = [
            row[3]
            for row in lite.execute(f"EXPLAIN QUERY PLAN {queries('sqlite')['schedule_states']}")
        ]
    lite.close()
    assert plan[0] == "SCAN oncely_schedules USING INDEX oncely_schedules_stopped", plan


def test_sqlite_partial_indexes_cost_the_updates_that_set_status_no_temporary_tables(
    sqlite_url: str,
) -> None:
    # SQLite 3.40 tests a row against an IN list of three or more values through a temporary
    # b-tree it builds each time; written so in a partial index's WHERE, every claim and booking
    # built them for each row, before and after, and one worker drained a burst at a third of its
    # speed (6,937 jobs/s against 19,330).
    path = _migrated_sqlite(sqlite_url)
    sql = queries("sqlite")
    setting_status = ("start_attempts", "book_one_success", "book_retry", "book_failed", "abandon")
    with sqlite3.connect(path, isolation_level=None) as connection:

        def temporary_tables(seen: str) -> dict[str, int]:
            counts = {}
            for name in setting_status:
                params = dict.fromkeys(re.findall(r":(\w+)", sql[name]), 0)
                # A text of its own each time: the driver's statement cache would answer with
                # the program compiled before the indexes were dropped.
                statement = f"EXPLAIN /* {seen} */ {sql[name]}"
                program = connection.execute(statement, params).fetchall()
                counts[name] = [step[1] for step in program].count("OpenEphemeral")
            return counts

        with_them = temporary_tables("with")
        connection.execute("BEGIN")
        partial = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index'"
            " AND tbl_name = 'oncely_occurrences' AND sql LIKE '%WHERE%'"
        ).fetchall()
        assert len(partial) >= 4
        for (name,) in partial:
            connection.execute(f"DROP INDEX {name}")
        without_them = temporary_tables("without")
        connection.execute("ROLLBACK")
    connection.close()
    assert with_them == without_them
