"""bench/report.py --keep: a benchmark's outcome is saved when it succeeds and used again by a
later run of the same command, so that a report stopped part way resumes; no timings."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def report(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.delitem(sys.modules, "report", raising=False)
    return importlib.import_module("report")


def _task(report: ModuleType, *args: str) -> object:
    return report.Task("locks", Path(sys.executable), "locks.py", ("--runs", "1", *args))


def test_a_kept_outcome_is_used_again_by_the_same_command_only(
    report: ModuleType, tmp_path: Path
) -> None:
    task = _task(report)
    done = report.Outcome(task, document={"pairs": 3}, stdout="ok\n", elapsed_s=12.5, load=[0.1])
    assert report.kept_outcome(task, tmp_path) is None
    report.keep_outcome(done, tmp_path)
    found = report.kept_outcome(task, tmp_path)
    assert found is not None
    assert (found.document, found.stdout, found.elapsed_s) == ({"pairs": 3}, "ok\n", 12.5)
    assert found.kept_from is not None
    assert "git" in found.kept_from
    assert report.kept_outcome(_task(report, "--seconds", "9"), tmp_path) is None


def test_a_run_with_keep_does_not_run_what_it_kept(report: ModuleType, tmp_path: Path) -> None:
    task = _task(report)
    report.keep_outcome(report.Outcome(task, document={"pairs": 3}), tmp_path)
    outcome = report.run_task(task, tmp_path, keep=True)  # locks.py would need Redis: not run
    assert outcome.document == {"pairs": 3}
    assert outcome.kept_from
