"""Smoke test of bench/locks.py: every provider, one short run; no timings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "locks.py"


@pytest.mark.postgres
@pytest.mark.redis
def test_locks_bench_runs_every_provider(postgres_url: str, redis_url: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--seconds", "0.2", "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")][1:]
    assert [row.split("|")[1].strip() for row in rows] == ["sqlite", "postgres", "redis"]
