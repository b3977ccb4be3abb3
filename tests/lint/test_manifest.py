"""The run manifest: a run where nothing changed is replayed, without the engine; any change that
could change the output is a miss, and the engine runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oncely.lint import cache as lint_cache
from oncely.lint import command, engine
from oncely.lint.manifest import CACHE_FOLDER
from oncely.lint.signing import seal, unseal

FILES = {
    "pkg/__init__.py": "",
    "pkg/a.py": "x = 1  # oncely: allow ONC101\n",
    "pkg/sub/b.py": "y = 2\n",
}
PAST = time.time_ns() - 100 * 10**9


def _project(root: Path, config: str = "") -> Path:
    """A project whose files and directories are all older than any run's clock."""
    (root / "pyproject.toml").write_text(f"[tool.oncely.lint]\n{config}\n")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / CACHE_FOLDER).mkdir(parents=True)
    _age(root)
    return root


def _age(root: Path, ns: int = PAST) -> None:
    for folder, _, names in os.walk(root, topdown=False):
        for name in names:
            os.utime(Path(folder, name), ns=(ns, ns))
        os.utime(folder, ns=(ns, ns))


class Runs:
    """`command.run` in this process: what it printed, and whether the engine ran."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
        self.capsys = capsys
        self.linted = 0
        real = engine.lint_files

        def counting(*args: object, **kwargs: object) -> object:
            self.linted += 1
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(engine, "lint_files", counting)

    def __call__(self, *paths: str, **options: str) -> tuple[int, str, str, bool]:
        """(status, stdout, stderr, replayed)."""
        before = self.linted
        status = command.run(paths, **options)  # type: ignore[arg-type]
        said = self.capsys.readouterr()
        return status, said.out, said.err, self.linted == before


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Runs:
    return Runs(capsys, monkeypatch)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return _project(tmp_path)


def test_an_unchanged_run_is_replayed_as_it_was(root: Path, run: Runs) -> None:
    first = run("pkg")
    assert (first[0], first[1][:21], first[2:]) == (
        1,
        "pkg/a.py:1:8: ONC000 ",
        ("1 finding(s)\n", False),
    )
    assert run("pkg") == (*first[:3], True)
    assert run("pkg") == (*first[:3], True)
    assert len(list((root / CACHE_FOLDER).glob("run-*.json"))) == 1


def test_a_changed_file_is_a_miss(root: Path, run: Runs) -> None:
    run("pkg")
    (root / "pkg/sub/b.py").write_text("y = 2  # oncely: allow ONC101\n")
    status, out, _, replayed = run("pkg")
    assert (status, replayed) == (1, False)
    assert out.count(": ONC000 ") == 2


def test_an_added_file_is_a_miss(root: Path, run: Runs) -> None:
    run("pkg")
    (root / "pkg/sub/c.py").write_text("def f(:\n")
    _, out, _, replayed = run("pkg")
    assert (replayed, "pkg/sub/c.py:1:7: ONC001" in out) == (False, True)


def test_a_deleted_file_is_a_miss(root: Path, run: Runs) -> None:
    run("pkg")
    (root / "pkg/a.py").unlink()
    assert run("pkg") == (0, "", "", False)


def test_a_file_changed_in_the_tick_of_the_clock_is_never_trusted(
    root: Path, run: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Racily clean: a file whose mtime is not older than the clock the run took before reading
    it may change again within that tick, keeping its stat: no manifest may vouch for it."""
    clock = PAST + 10**9
    monkeypatch.setattr(lint_cache, "file_system_time", lambda folder: clock)
    racy = root / "pkg/sub/b.py"
    os.utime(racy, ns=(clock, clock))
    assert run("pkg")[:2] == (1, run("pkg")[1])
    racy.write_text("y = (\n")  # the same size, in place: the same inode, and the same mtime
    os.utime(racy, ns=(clock, clock))
    _, out, _, replayed = run("pkg")
    assert (replayed, "pkg/sub/b.py:1:5: ONC001" in out) == (False, True)


@pytest.mark.parametrize("config", ['ignore = ["ONC000"]', 'exclude = ["pkg/a.py"]'])
def test_a_changed_configuration_is_a_miss(root: Path, run: Runs, config: str) -> None:
    run("pkg")
    (root / "pyproject.toml").write_text(f"[tool.oncely.lint]\n{config}\n")
    assert run("pkg") == (0, "", "", False)


def test_a_nearer_configuration_is_a_miss(root: Path, run: Runs) -> None:
    run("pkg")
    assert run("pkg")[3] is True
    (root / "pkg/pyproject.toml").write_text('[tool.oncely.lint]\nignore = ["ONC000"]\n')
    _age(root / "pkg")  # the directory's mtime hides the new file: the search must find it
    assert run("pkg") == (0, "", "", False)


@pytest.mark.parametrize(
    "options",
    [{"fmt": "json"}, {"select": "ONC001"}, {"ignore": "ONC000"}],
    ids=["format", "select", "ignore"],
)
def test_the_options_are_part_of_the_key(root: Path, run: Runs, options: dict[str, str]) -> None:
    plain = run("pkg")
    assert run("pkg")[3] is True
    other = run("pkg", **options)
    assert (other[1] != plain[1], other[3]) == (True, False)
    assert run("pkg", **options) == (*other[:3], True)
    assert run("pkg") == (*plain[:3], True)


def test_a_run_from_another_directory_is_a_miss(
    root: Path, run: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same command line, over the very same files (moved: same inodes, sizes and times),
    from another directory: paths relative to the config root, which decide exclusions and
    allow lists (and module names, ONC201), differ."""
    (root / "pyproject.toml").write_text('[tool.oncely.lint]\nexclude = ["one/*"]\n')
    (root / "one").mkdir()
    (root / "two").mkdir()
    (root / "pkg").rename(root / "one" / "pkg")
    _age(root)
    monkeypatch.chdir(root / "one")
    assert run("pkg") == (0, "", "", False)
    (root / "one" / "pkg").rename(root / "two" / "pkg")
    _age(root / "two" / "pkg")
    monkeypatch.chdir(root / "two")
    status, out, _, replayed = run("pkg")
    assert (status, replayed, out.startswith("pkg/a.py:1:8: ONC000")) == (1, False, True)


def test_the_lint_code_is_part_of_the_key(
    root: Path, run: Runs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from oncely.lint import manifest

    code = tmp_path / "code"
    (code / "rules").mkdir(parents=True)
    (code / "rules" / "onc999_rule.py").write_text("")
    _age(code)
    monkeypatch.setattr(manifest, "_LINT_PACKAGE", str(code))
    run("pkg")
    assert run("pkg")[3] is True
    (code / "rules" / "onc999_rule.py").write_text("# edited\n")
    assert run("pkg")[3] is False


def test_no_cache_reads_and_writes_no_manifest(root: Path, run: Runs) -> None:
    run("pkg")
    assert run("pkg")[3] is True
    assert run("pkg", no_cache=True)[3] is False  # type: ignore[arg-type]
    for manifest in (root / CACHE_FOLDER).glob("run-*.json"):
        manifest.unlink()
    run("pkg", no_cache=True)  # type: ignore[arg-type]
    assert list((root / CACHE_FOLDER).glob("run-*.json")) == []


def test_a_damaged_manifest_is_a_miss(root: Path, run: Runs) -> None:
    first = run("pkg")
    (manifest,) = (root / CACHE_FOLDER).glob("run-*.json")
    body = unseal(manifest.read_bytes())
    assert body is not None
    document = json.loads(body)
    for damage in ["{not json", json.dumps({**document, "status": "1"}), "[]"]:
        sealed = seal(damage)  # as this user's runs would write it: no seal catches it
        assert sealed is not None
        manifest.write_text(sealed)
        assert run("pkg") == (*first[:3], False)


def test_the_console_replays_without_importing_the_engine_rules_or_click(root: Path) -> None:
    watch = (
        "import atexit, json, sys; "
        "atexit.register(lambda: sys.__stderr__.write(json.dumps(sorted(sys.modules)))); "
        "sys.argv[0] = 'oncely'; from oncely.cli import console; console()"
    )

    def console() -> tuple[int, str, set[str]]:
        done = subprocess.run(
            [sys.executable, "-c", watch, "lint", "pkg"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        said, modules = done.stderr.split("[", 1)
        return done.returncode, done.stdout + said, set(json.loads("[" + modules))

    first = console()
    assert "oncely.lint.engine" in first[2]
    warm = console()
    assert warm[:2] == first[:2]
    heavy = {"oncely.lint.engine", "oncely.lint.rules", "oncely.lint.config", "click", "ast"}
    assert sorted(heavy & warm[2]) == []
