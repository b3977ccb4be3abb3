"""bench/report.py's saved outcomes: each benchmark's outcome is saved when it succeeds, and
``--resume`` uses it again only for the same command on the same source; no timings."""

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


def test_a_saved_outcome_is_used_again_by_the_same_command_on_the_same_source_only(
    report: ModuleType, tmp_path: Path
) -> None:
    task = _task(report)
    done = report.Outcome(task, document={"pairs": 3}, stdout="ok\n", elapsed_s=12.5, load=[0.1])
    assert report.saved_outcome(task, tmp_path, "src-1") is None
    report.save_outcome(done, tmp_path, "src-1")
    found = report.saved_outcome(task, tmp_path, "src-1")
    assert found is not None
    assert (found.document, found.stdout, found.elapsed_s) == ({"pairs": 3}, "ok\n", 12.5)
    assert found.kept_from is not None
    assert "git" in found.kept_from
    assert report.saved_outcome(_task(report, "--seconds", "9"), tmp_path, "src-1") is None
    assert report.saved_outcome(task, tmp_path, "src-2") is None  # other code: measure again


def test_resume_does_not_run_what_was_saved(report: ModuleType, tmp_path: Path) -> None:
    task = _task(report)
    report.save_outcome(report.Outcome(task, document={"pairs": 3}), tmp_path, "src-1")
    # locks.py would need Redis and take seconds: it is not run.
    outcome = report.run_task(task, tmp_path, results=tmp_path, source="src-1", resume=True)
    assert outcome.document == {"pairs": 3}
    assert outcome.kept_from


def test_the_source_digest_changes_with_oncely_source(
    report: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "src" / "oncely").mkdir(parents=True)
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "requirements-peers.txt").write_text("pgqueuer\n")
    module = tmp_path / "src" / "oncely" / "engine.py"
    module.write_text("A = 1\n")
    monkeypatch.setattr(report, "ROOT", tmp_path)
    monkeypatch.setattr(report, "_BENCH_DIR", tmp_path / "bench")
    first = report.source_digest()
    (tmp_path / "bench" / "_report_page.py").write_text("# only makes the page\n")
    assert report.source_digest() == first
    module.write_text("A = 2\n")
    assert report.source_digest() != first
