"""bench/lint_replay.py on a project made here: a suppression written at an older commit, carried
by git to a later one where its loop no longer waits, is reported stale (ONC002)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "lint_replay.py"


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _commit(work: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    _git("add", ".", cwd=work)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c", cwd=work)
    return _git("rev-parse", "HEAD", cwd=work)


def test_a_carried_suppression_whose_finding_went_away_is_stale(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", cwd=work)
    timer = "import time\n\n\ndef run():\n    while True:\n        sync()\n        time.sleep(60)\n"
    report = "import time\n\nwhile True:\n    report()\n    time.sleep(3600)\n"
    old = _commit(work, {"app/sync.py": timer, "app/report.py": report})
    until_done = timer.replace("time.sleep(60)", "if done():\n            break")
    new = _commit(work, {"app/sync.py": until_done})
    mirror = tmp_path / "mirror" / "someone+project"
    mirror.parent.mkdir()
    _git("clone", "-q", "--bare", str(work), str(mirror / "repo"), cwd=tmp_path)
    replay = tmp_path / "replay.txt"
    replay.write_text(
        f"someone/project {old} {new}\n"
        "    app/sync.py:5 ONC101 -- the sync loop of a single-process tool\n"
        "    app/report.py:3 ONC101 -- the hourly report of a single-process tool\n"
    )
    judged = tmp_path / "judged.txt"
    judged.write_text("someone/project app/sync.py:5 ONC002 true -- the loop no longer waits\n")
    places = ["--mirror", str(tmp_path / "mirror"), "--root", str(tmp_path / "scratch")]
    options = ["--replay", str(replay), "--judged", str(judged), "--configs", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *options, *places],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    out = done.stdout
    assert "2 suppression(s) written, 2 carried by the merge" in out
    assert "0 dropped, 1 stale (ONC002)" in out  # the report loop's suppression is still in use
    assert "| ONC002 | 1 | 0 | 0 | 0 | 0 |" in out
    assert "someone/project app/sync.py:5 ONC002 [true]" in out
