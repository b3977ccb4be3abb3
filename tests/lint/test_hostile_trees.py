"""oncely lint on a tree someone crafted (issue 23): files that are not regular files are not
read, and a cache folder that arrives with the tree (committed, copied, edited) is not trusted."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import pytest

from oncely.lint import command
from oncely.lint.cache import CACHE_DIR
from oncely.lint.manifest import CACHE_FOLDER
from oncely.lint.signing import key_path, seal, unseal

VIOLATION = "import time\n\nwhile True:\n    work()\n    time.sleep(60)\n"


def _project(root: Path) -> Path:
    (root / "pyproject.toml").write_text("[tool.oncely.lint]\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "timer.py").write_text(VIOLATION)
    return root


def _lint(root: Path, *args: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """One run in ``root``, in a thread given 60 s: a run that hangs fails instead of stalling
    the suite (the wait is a guard, not an assertion on time)."""
    monkeypatch.chdir(root)
    outcome: list[int] = []
    thread = threading.Thread(target=lambda: outcome.append(command.run([*args])), daemon=True)
    thread.start()
    thread.join(60)
    assert outcome, "the run did not finish: it is stuck on a file that is not a regular one"
    return outcome[0]


@pytest.fixture(autouse=True)
def own_key(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's user: a key of its own, outside every tree."""
    home = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "device", "dangling"])
def test_discovery_reads_regular_files_only(
    tmp_path: Path,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _project(tmp_path)
    trap = root / "pkg" / "trap.py"
    if kind == "dev-zero":
        trap.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(trap)
    elif kind == "device":
        trap.symlink_to("/dev/null")
    else:
        trap.symlink_to(root / "missing.py")
    status = _lint(root, "--no-cache", "pkg", monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert status == 1
    assert [line.split(": ")[1].split()[0] for line in out.splitlines()] == ["ONC101"]
    assert out.startswith("pkg/timer.py:3:1: ONC101")


def test_a_fifo_named_on_the_command_line_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path)
    os.mkfifo(root / "pkg" / "named.py")
    status = _lint(root, "--no-cache", "pkg/named.py", "pkg/timer.py", monkeypatch=monkeypatch)
    assert status == 1
    assert capsys.readouterr().out.startswith("pkg/timer.py:3:1: ONC101")


def test_a_cache_entry_edited_to_no_findings_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path)
    assert _lint(root, "pkg", monkeypatch=monkeypatch) == 1
    document = root / CACHE_DIR / "findings.json"
    mac, body_text = document.read_text().split("\n", 1)
    body = json.loads(body_text)
    [entry] = body["entries"].values()
    assert [code for _, _, code, *_ in entry["findings"]] == ["ONC101"]
    entry["findings"] = []
    document.write_text(f"{mac}\n{json.dumps(body)}")  # the seal is left as it was
    for manifest in (root / CACHE_FOLDER).glob("run-*.json"):
        manifest.unlink()  # a run answered whole would not read the entry at all
    capsys.readouterr()
    assert _lint(root, "pkg", monkeypatch=monkeypatch) == 1
    assert capsys.readouterr().out.startswith("pkg/timer.py:3:1: ONC101")


def test_a_manifest_edited_to_a_clean_run_is_not_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path)
    assert _lint(root, "pkg", monkeypatch=monkeypatch) == 1
    [manifest] = (root / CACHE_FOLDER).glob("run-*.json")
    mac, body_text = manifest.read_text().split("\n", 1)
    body = json.loads(body_text)
    body.update(out="", err="", status=0)
    manifest.write_text(f"{mac}\n{json.dumps(body)}")
    capsys.readouterr()
    assert _lint(root, "pkg", monkeypatch=monkeypatch) == 1
    assert capsys.readouterr().out.startswith("pkg/timer.py:3:1: ONC101")


def test_a_cache_folder_from_another_machine_is_not_trusted(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A committed .oncely_cache sealed with its author's key, whose entry for the violating
    file says "no findings": trusted where it was sealed, a miss anywhere else."""
    root = _project(tmp_path)
    timer = root / "pkg" / "timer.py"
    timer.write_text("x = 1\n")
    assert _lint(root, "pkg", monkeypatch=monkeypatch) == 0  # the author's clean run
    timer.write_text(VIOLATION)
    document = root / CACHE_DIR / "findings.json"
    body = unseal(document.read_bytes())
    assert body is not None
    cached = json.loads(body)
    [entry] = cached["entries"].values()
    entry.update(digest=hashlib.sha256(VIOLATION.encode()).hexdigest(), stat=None, findings=[])
    forged = seal(json.dumps(cached))
    assert forged is not None

    def plant() -> None:
        document.write_text(forged)
        for manifest in (root / CACHE_FOLDER).glob("run-*.json"):
            manifest.unlink()

    plant()
    assert _lint(root, "pkg", monkeypatch=monkeypatch) == 0  # the forgery works there
    plant()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("another-user")))
    assert not Path(key_path()).exists()
    capsys.readouterr()
    assert _lint(root, "pkg", monkeypatch=monkeypatch) == 1
    assert capsys.readouterr().out.startswith("pkg/timer.py:3:1: ONC101")


def test_the_key_is_the_users_alone_and_outside_the_tree(tmp_path: Path, own_key: Path) -> None:
    root = _project(tmp_path)
    assert seal("{}") is not None
    key = Path(key_path())
    assert key.is_relative_to(own_key)
    assert not key.is_relative_to(root)
    assert (key.stat().st_mode & 0o777) == 0o600
