"""Smoke test of bench/history.py: two tiny scales on both stores, one run; no timings."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "history.py"
READS = (
    "idle tick", "claim_due of 1,000", "app.history(key)", "app.for_tenant(t).history(key)",
    "app.explain(key)", "oncely jobs, first page",
)  # fmt: skip


@pytest.mark.postgres
def test_history_bench_writes_its_figures_and_its_section(
    postgres_url: str, tmp_path: Path
) -> None:
    server = postgres_url.rsplit("/", 1)[0]
    page = tmp_path / "performance.md"
    page.write_text("# Performance\n\n## Commands\n\n- one\n")
    out = tmp_path / "history.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--scale", "2k,3k", "--runs", "1", "--server", server,
         "--database-prefix", f"t_history_{uuid.uuid4().hex[:8]}", "--json", str(out),
         "--write", str(page)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["skipped"] == []
    for store in ("postgres", "sqlite"):
        small, big = document["stores"][store]["2k"], document["stores"][store]["3k"]
        assert (small["occurrences"], big["occurrences"]) == (2000, 3000)
        assert tuple(big["reads_ms"]) == READS
        retention = big["retention"]
        assert retention["sweep"]["rows"] == retention["bulk"]["rows"] == 300  # a day's
        assert big["sizes"]["database"] > 0
    assert document["stores"]["postgres"]["3k"]["sizes"]["each"]["oncely_occurrences_history"]
    written = page.read_text()
    assert written.index("## History at scale") < written.index("## Commands")
    assert "| PostgreSQL, ms | 2k | 3k | 3k ÷ 2k |" in written
    assert "| SQLite | 3k | 300 |" in written
