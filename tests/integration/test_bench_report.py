"""Smoke test of bench/report.py --quick: every benchmark runs once, tiny, side by side, with one
peer, and the page and its chart are written with every section; no timings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "report.py"
SITE = sorted((ROOT / ".venv-bench" / "lib").glob("python3*/site-packages"))
NEEDED = ("pgqueuer", "matplotlib", "flake8", "ruff", "importlinter", "django")
MISSING = [name for name in NEEDED if not SITE or not (SITE[-1] / name).is_dir()]
SECTIONS = (
    "# Performance",
    "## Burst throughput",
    "## Lag",
    "### Recurring: 5 schedules due every second",
    "### One-offs: 5 due at each whole second, enqueued beforehand",
    "## Idle cost",
    "## Lock throughput",
    "## Lint speed",
    "## Recurrence expansion",
    "## Commands",
)


@pytest.mark.skipif(
    bool(MISSING),
    reason=f".venv-bench lacks {', '.join(MISSING)}: "
    "python3 -m venv .venv-bench && .venv-bench/bin/pip install -r bench/requirements-peers.txt",
)
def test_report_writes_every_section_and_the_chart(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    # The fixtures only make the test skip (or fail under CI) when a service is down: the
    # benchmarks use the default local PostgreSQL and Redis, as `make bench` does.
    out = tmp_path / "performance.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--peers", "pgqueuer", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    page = out.read_text()
    assert [section for section in SECTIONS if section not in page] == []
    assert "failed; not measured" not in page
    assert (tmp_path / "performance-lag.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![Lag p50/p90/p99 per scheduler](performance-lag.png)" in page
    for row in ("| oncely | PostgreSQL | 1 |", "| pgqueuer | PostgreSQL | 1 |"):  # burst
        assert row in page
    lag_rows = [line for line in page.splitlines() if line.startswith("| pgqueuer | `")]
    assert len(lag_rows) == 3  # recurring, one-off, idle
    assert "| oncely lint |" in page
    assert "bench/report.py --quick --peers pgqueuer --out" in page
