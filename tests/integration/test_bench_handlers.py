"""Smoke test of bench/handlers.py without the peers: oncely's two deliveries and the bare loop
drain a tiny burst whose handlers INSERT, with 1 and 2 workers; counts, no timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "handlers.py"


@pytest.mark.postgres
def test_handlers_bench_drains_every_key_once(tmp_path: Path, postgres_url: str) -> None:
    out, page = tmp_path / "handlers.json", tmp_path / "performance.md"
    page.write_text("# Performance\n\n## Commands\n")
    done = subprocess.run(
        [
            sys.executable, str(SCRIPT), "--runs", "1", "--jobs", "40", "--workers", "1,2",
            "--no-peers", "--json", str(out), "--write", str(page),
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads(out.read_text())["results"]
    assert sorted(results) == ["bare", "oncely", "oncely-transactional"]
    for subject, by_workers in results.items():
        assert sorted(by_workers) == ["1", "2"], subject
        for entry in by_workers.values():
            median = entry["median"]
            assert (median["duplicates"], median["missing"]) == (0, 0), subject
            assert median["commits_per_job"] >= 1  # at least the INSERT's own
            assert median["peak_rss_mb"] > 0
    written = page.read_text()
    assert written.index("## Real handlers") < written.index("## Commands")
    assert "| oncely transactional (`run.connection`) | 2 | 10 | 40 |" in written
