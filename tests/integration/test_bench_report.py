"""Smoke tests of bench/report.py --quick: every benchmark runs once, tiny, side by side, and the
page is written with every section; no timings. The oncely-only run (--no-peers) needs no
.venv-bench and runs in every `make test`; the one with a peer also draws the chart."""

from __future__ import annotations

import hashlib
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
    "## Real handlers",
    "## Enqueue",
    "## Lock throughput",
    "## Lint speed",
    "## Recurrence expansion",
    "## History at scale",
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
    assert "| pgqueuer (as bench/_peers/pgqueuer_peer.py" in page  # enqueue
    assert "| pgqueuer | 1 | 10 | 200 |" in page  # real handlers
    lag_rows = [line for line in page.splitlines() if line.startswith("| pgqueuer | `")]
    assert len(lag_rows) == 3  # recurring, one-off, idle
    assert "| oncely lint |" in page
    assert "bench/report.py --quick --peers pgqueuer --out" in page


def _digests(*trees: Path) -> dict[Path, str]:
    return {
        path: hashlib.sha256(path.read_bytes()).hexdigest()
        for tree in trees
        for path in sorted(tree.rglob("*"))
        if path.is_file()
    }


def test_report_of_oncely_alone_writes_every_section_without_the_peers_venv(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    # As above, the fixtures stand for the default local services the benchmarks use.
    out = tmp_path / "page" / "performance.md"
    results = tmp_path / "results"
    committed = _digests(ROOT / "docs", ROOT / "bench" / "results")
    done = subprocess.run(
        [
            sys.executable, str(SCRIPT), "--quick", "--no-peers",
            "--out", str(out), "--results", str(results),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    page = out.read_text()
    assert [section for section in SECTIONS if section not in page] == []
    assert "failed; not measured" not in page
    assert "--no-peers`: oncely alone" in page
    for row in ("| oncely | PostgreSQL | 1 | 200 |", "| oncely | SQLite | 1 | 200 |"):  # burst
        assert row in page
    lag_rows = [line for line in page.splitlines() if line.startswith("| oncely | `")]
    assert len(lag_rows) == 6  # recurring, one-off and idle, on each store
    assert "| oncely lint |" in page
    assert "not checked: no peer was measured (--no-peers)" in page
    assert "performance-lag.png" not in page
    assert list(out.parent.iterdir()) == [out]  # no chart
    rows = [line for line in page.splitlines() if line.startswith("| ") and "---" not in line]
    assert {row.split(" | ")[0] for row in rows} >= {"| oncely", "| SQLite", "| PostgreSQL"}
    assert [row for row in rows if row.startswith(("| pgqueuer", "| procrastinate", "| APS"))] == []
    assert sorted(p.name for p in results.iterdir()) == [
        "burst-oncely.json", "enqueue.json", "handlers.json", "history.json", "lint.json",
        "locks.json",
        "recurrence.json",
        "worker-postgres-idle.json", "worker-postgres-oneoff.json",
        "worker-postgres-recurring.json", "worker-sqlite-idle.json",
        "worker-sqlite-oneoff.json", "worker-sqlite-recurring.json",
    ]  # fmt: skip
    assert _digests(ROOT / "docs", ROOT / "bench" / "results") == committed
