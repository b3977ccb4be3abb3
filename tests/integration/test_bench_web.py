"""Smoke test of bench/web.py: a small store, one run of every page; no timings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "web.py"


@pytest.mark.postgres
def test_web_bench_renders_every_page(postgres_url: str) -> None:
    admin = postgres_url.rsplit("/", 1)[0] + "/postgres"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--schedules", "300", "--per", "3", "--runs", "1",
         "--postgres", admin],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == 13
    assert "300 schedules and 900 occurrences stored with COPY" in done.stdout
