"""bench/lint_corpus.py on a corpus of one project made here: materialised from a git dir,
linted, its findings split into test code and the rest and matched to their judgments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "lint_corpus.py"


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_corpus_script_counts_judged_findings_and_keeps_vendored_code_out(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    (work / "app").mkdir(parents=True)
    (work / "tests").mkdir()
    (work / "lib").mkdir()
    timer = "import time\n\nwhile True:\n    work()\n    time.sleep(60)\n"
    (work / "app" / "sync.py").write_text(timer)
    (work / "tests" / "test_sync.py").write_text(timer)
    (work / "lib" / "vendored.py").write_text(timer)
    (work / "README").write_text("not python\n")
    _git("init", "-q", cwd=work)
    _git("add", ".", cwd=work)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c", cwd=work)
    commit = _git("rev-parse", "HEAD", cwd=work)
    mirror = tmp_path / "mirror" / "someone+project"
    mirror.parent.mkdir()
    _git("clone", "-q", "--bare", str(work), str(mirror / "repo"), cwd=tmp_path)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"# one project\nsomeone/project {commit} exclude=lib/* a tool\n")
    judged = tmp_path / "judged.txt"
    judged.write_text("someone/project app/sync.py:3 ONC101 true -- hourly sync on a timer\n")
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "someone+project.toml").write_text(
        '[tool.oncely.lint.ONC202]\nsymbols = { "time.sleep" = ["app.clock"] }\n'
    )
    options = ["--corpus", str(corpus), "--judged", str(judged), "--configs", str(configs)]
    options.append("--list")
    places = ["--mirror", str(tmp_path / "mirror"), "--root", str(tmp_path / "scratch")]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *options, *places],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    out = done.stdout
    assert "excluding lib/*, configured by someone+project.toml, 4 finding(s)" in out
    assert "| ONC101 | 1+1t | 1+1t |" in out
    assert "| ONC202 | 1+1t | 1+1t |" in out
    assert "| ONC204 | 0 | 0 | 0 | 0 | 0 |" in out  # every rule has its row, found or not
    assert "| ONC101 | 1 | 0 | 0 | 0 | 1 |" in out  # the test file's finding is not judged yet
    assert "someone/project tests/test_sync.py:3 ONC101 [test UNJUDGED]" in out
    assert not (tmp_path / "scratch" / "someone+project" / "README").exists()
