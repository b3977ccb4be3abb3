"""The burst harness's template databases: enqueued once, each run drains its own copy."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psycopg

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from _peers import SUBJECT, harness, load  # noqa: E402
from peers import DEFAULT_SERVER  # noqa: E402


def _benchmark_databases() -> set[str]:
    """This process's benchmark databases (``bench_<name>_<pid>``): a benchmark running
    beside the suite has its own, and counting them failed the test."""
    with harness.admin_connection(DEFAULT_SERVER) as connection:
        rows = connection.execute("SELECT datname FROM pg_database WHERE datname LIKE 'bench_%'")
        return {name for (name,) in rows if name.endswith(f"_{os.getpid()}")}


def test_every_run_drains_a_full_copy_of_the_enqueued_template(postgres_url: str) -> None:
    # postgres_url only makes the test skip (or fail under CI) when PostgreSQL is down: the
    # harness uses the default local server, as `make bench` does.
    module = load(SUBJECT)
    before = _benchmark_databases()
    with harness.enqueued(SUBJECT, module, DEFAULT_SERVER, 30) as template:
        assert template.database in _benchmark_databases()
        runs = [
            harness.run_once(SUBJECT, module, DEFAULT_SERVER, 30, 1, 60, template=template)
            for _ in range(2)
        ]
        with psycopg.connect(harness.dsn_for(DEFAULT_SERVER, template.database)) as connection:
            row = connection.execute(
                "SELECT count(*) FROM oncely_occurrences WHERE status = 'pending'"
            ).fetchone()
        assert row == (30,)  # the runs drained their copies, not the template
    for run in runs:
        assert (run.executions, run.duplicates, run.missing) == (30, 0, 0)
        assert run.enqueue_s == template.enqueue_s
    assert _benchmark_databases() == before
