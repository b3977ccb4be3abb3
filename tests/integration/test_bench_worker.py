"""Smoke test of bench/worker.py: tiny sizes, real worker processes, its tables; no timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "worker.py"
TINY = [
    "--runs", "1", "--schedules", "5", "--seconds", "7", "--margin", "2",
    "--idle-schedules", "20", "--idle-seconds", "2", "--idle-settle", "2",
]  # fmt: skip


def _bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = tmp_path / "worker.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *TINY, *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(out.read_text())


def test_worker_bench_runs_on_sqlite_and_prints_its_tables(tmp_path: Path) -> None:
    done, document = _bench(tmp_path, "--stores", "sqlite", "--profile")
    lag = document["lag"]["sqlite"]["median"]
    assert lag["due"] == 5 * lag["window_s"] > 0  # 5 schedules, every whole second of the window
    assert lag["duplicates"] == 0
    assert lag["ran"] + lag["misses"] == lag["due"] > lag["misses"]
    assert lag["history"].get("succeeded", 0) >= lag["ran"]
    profiled = document["lag"]["sqlite"]["profiled"]["profile"]
    assert "advance_schedule" in {timed["statement"] for timed in profiled["statements"]}
    idle = document["idle"]["sqlite"]
    assert idle["schedules"] == 20
    assert idle["median"]["sqlite_statements_per_min"] is not None
    assert "## Lag: 5 schedules" in done.stdout
    assert f"| sqlite | 1 | {lag['due']} |" in done.stdout
    assert "## Idle: 20 schedules" in done.stdout
    assert "- command: `" in done.stdout


@pytest.mark.postgres
def test_worker_bench_runs_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    server = postgres_url.rsplit("/", 1)[0]  # the bench makes and drops its own databases
    done, document = _bench(tmp_path, "--stores", "postgres", "--server", server)
    lag = document["lag"]["postgres"]["median"]
    assert (lag["workers"], lag["duplicates"]) == (2, 0)
    assert lag["ran"] + lag["misses"] == lag["due"] > lag["misses"]
    assert document["idle"]["postgres"]["median"]["pg_transactions_per_min"] is not None
    assert f"| postgres | 2 | {lag['due']} |" in done.stdout
    assert "PostgreSQL 1" in done.stdout
