"""Smoke tests of bench/lint.py on oncely's own small tree: every tool runs once (oncely's alone
with --no-peers, which needs no .venv-bench); no timings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "lint.py"
PEERS_BIN = ROOT / ".venv-bench" / "bin"
MISSING = [name for name in ("flake8", "lint-imports", "ruff") if not (PEERS_BIN / name).is_file()]


@pytest.mark.skipif(
    bool(MISSING),
    reason=f".venv-bench lacks {', '.join(MISSING)}: "
    "python3 -m venv .venv-bench && .venv-bench/bin/pip install -r bench/requirements-peers.txt",
)
def test_lint_bench_times_every_tool_and_states_the_targets() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", str(ROOT / "src" / "oncely"), "--runs", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[2:]] == [
        "| oncely lint",
        "| flake8 --select F",
        "| lint-imports",
        "| ruff check --select F",
    ]
    assert "lint-imports contract: independence of oncely." in done.stdout
    assert done.stdout.count("- cold faster than") == 2
    assert "- warm within 2x of ruff's warm run:" in done.stdout


def test_lint_bench_writes_nothing_into_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "tiny"
    tree.mkdir()
    (tree / "__init__.py").write_text("import os\n")
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    if MISSING:
        pytest.skip(f".venv-bench lacks {', '.join(MISSING)}")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", str(tree), "--runs", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.relative_to(tree) for p in tree.rglob("*")) == before


def test_lint_bench_of_oncely_alone_needs_no_peers_and_writes_nothing_into_the_tree(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tiny"
    tree.mkdir()
    (tree / "__init__.py").write_text("import os\n")
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", str(tree), "--runs", "1", "--no-peers"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[2:]] == ["| oncely lint"]
    assert "1 Python files, 1 lines" in done.stdout
    assert "- not checked: no peer was measured (--no-peers)" in done.stdout
    assert sorted(p.relative_to(tree) for p in tree.rglob("*")) == before


def test_lint_bench_without_peers_needs_a_tree() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--no-peers"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--no-peers needs --tree" in done.stderr
