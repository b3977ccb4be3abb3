"""The claim queries read the occurrences' indexes first, whatever the tables' statistics say.

Both failures these guard against were seen in bench/engine.py: SQLite, with statistics showing
many schedules and few occurrences, scanned every schedule on every tick; PostgreSQL, right after a
burst (statistics still saying "nearly empty"), read and sorted the whole backlog on every claim.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta

import psycopg

from oncely import every
from oncely.store import open_store
from oncely.store.queries import queries

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CLAIMS = ("claim_expired", "claim_ready", "claim_free", "expired_of_jobs")
SPEC = json.dumps(every(hours=1).to_spec(), sort_keys=True)


def test_sqlite_claims_start_from_the_occurrences(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    store.migrate(NOW)
    store.close()
    path = sqlite_url[len("sqlite:///") :]
    with sqlite3.connect(path) as connection:
        connection.executemany(
            "INSERT INTO oncely_schedules (tenant, key, job, origin, trigger_kind, trigger_spec,"
            " next_run_at, created_at, updated_at) VALUES ('', ?, 'j', 'api', 'every', ?, 1, 0, 0)",
            [(f"k{n}", SPEC) for n in range(2000)],
        )
        connection.execute("ANALYZE")
        params = {"now": 0, "jobs": '["j"]', "limit": 10}
        for name in CLAIMS:
            plan = [
                row[3]
                for row in connection.execute(
                    f"EXPLAIN QUERY PLAN {queries('sqlite')[name]}", params
                )
            ]
            assert plan[0].startswith(("SEARCH o USING INDEX", "SCAN o USING INDEX")), (name, plan)
    connection.close()


def test_postgres_claims_read_the_claimable_index_in_order(postgres_url: str) -> None:
    sql = queries("postgres")
    with psycopg.connect(postgres_url) as connection:
        connection.execute(
            "INSERT INTO oncely_schedules (key, job, origin, trigger_kind, trigger_spec,"
            " created_at, updated_at) SELECT 'k' || g, 'j', 'api', 'every', %s::jsonb, now(),"
            " now() FROM generate_series(1, 3000) g",
            (SPEC,),
        )
        connection.execute("ANALYZE")  # statistics taken before the burst, as in production
        connection.execute(
            "INSERT INTO oncely_occurrences (schedule_id, scheduled_for, status, run_after,"
            " created_at) SELECT id, now() - interval '1 s', 'pending', now() - interval '1 s',"
            " now() FROM oncely_schedules"
        )
        connection.execute(sql["prefer_ordered_scans"])
        params = {
            "now": NOW + timedelta(days=1), "jobs": ["j"], "limit": 10, "owner": "h#1",
            "until": NOW,
        }  # fmt: skip
        for name in ("claim_ready", "claim_free"):
            plan = "\n".join(
                str(row[0]) for row in connection.execute(f"EXPLAIN {sql[name]}", params)
            )
            assert "Index Scan using oncely_occurrences_claimable" in plan, (name, plan)
            assert "Sort" not in plan, (name, plan)
        connection.rollback()
