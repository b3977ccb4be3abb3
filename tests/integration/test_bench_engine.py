"""Smoke test of bench/engine.py on SQLite: it drains a small burst once and idles; no timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "engine.py"


def test_engine_bench_runs_and_counts_no_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "engine.json"
    done = subprocess.run(
        [
            sys.executable, str(SCRIPT), "--quick", "--no-peers", "--stores", "sqlite",
            "--workers", "2", "--ticks", "5", "--json", str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    median = document["oncely"]["sqlite"]["2"]["median"]
    assert (median["duplicates"], median["missing"]) == (0, 0)
    idle = document["idle"]["sqlite"]["sizes"]
    # The same queries at every size: the ended pauses, the due schedules, the two claims.
    assert {size["queries"] for size in idle.values()} == {4}
    assert "oncely (sqlite)" in done.stdout
