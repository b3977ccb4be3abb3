"""The lint cache: unchanged files are not parsed again; any change to a file or the settings is."""

from __future__ import annotations

import ast
import builtins
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from oncely.cli import main
from oncely.lint import Finding, LintConfig, lint_files, read_config
from oncely.lint import cache as lint_cache
from oncely.lint.cache import CACHE_DIR, LintCache
from oncely.lint.engine import enabled_codes
from oncely.lint.signing import seal, unseal

FILES = {
    "a.py": "x = 1  # oncely: allow ONC101\n",
    "pkg/b.py": "def f(:\n",
    "pkg/c.py": "y = 2\n",
}


def _project(root: Path, config: str = "") -> Path:
    (root / "pyproject.toml").write_text(f"[tool.oncely.lint]\n{config}\n")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The filenames ast.parse is called with, in order."""
    calls: list[str] = []
    real: Callable[..., Any] = ast.parse

    def counting(source: Any, filename: Any = "<unknown>", *args: Any, **kwargs: Any) -> Any:
        calls.append(Path(str(filename)).name)
        return real(source, filename, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    return calls


@pytest.fixture
def read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the cache opens to read, in order (its own document aside)."""
    calls: list[str] = []
    real: Callable[..., Any] = builtins.open

    def counting(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file).endswith(".py"):
            calls.append(Path(str(file)).name)
        return real(file, *args, **kwargs)

    monkeypatch.setattr(lint_cache, "open", counting, raising=False)
    return calls


def _entries(document: Path) -> Any:
    body = unseal(document.read_bytes())
    assert body is not None
    return json.loads(body)["entries"]


def _write_sealed(document: Path, body: str) -> None:
    """``body`` as this user's runs would have written it: a damage no seal can catch."""
    sealed = seal(body)
    assert sealed is not None
    document.write_text(sealed)


def _set_mtime(path: Path, ns: int) -> None:
    os.utime(path, ns=(ns, ns))


def _run(root: Path, config: LintConfig | None = None) -> list[Finding]:
    config = config or read_config(root / "pyproject.toml")
    return lint_files([root], config, cache=LintCache(config, enabled_codes(config)))


def test_a_second_run_parses_nothing_and_finds_the_same(tmp_path: Path, parsed: list[str]) -> None:
    root = _project(tmp_path)
    first = _run(root)
    assert sorted(parsed) == ["a.py", "b.py", "c.py"]
    assert [(f.path, f.code) for f in first] == [("a.py", "ONC000"), ("pkg/b.py", "ONC001")]
    parsed.clear()
    assert _run(root) == first
    assert parsed == []


def test_a_changed_file_alone_is_parsed_again(tmp_path: Path, parsed: list[str]) -> None:
    root = _project(tmp_path)
    _run(root)
    parsed.clear()
    (root / "pkg" / "c.py").write_text("y = 2  # oncely: allow ONC101\n")
    findings = _run(root)
    assert parsed == ["c.py"]
    assert [(f.path, f.code) for f in findings] == [
        ("a.py", "ONC000"),
        ("pkg/b.py", "ONC001"),
        ("pkg/c.py", "ONC000"),
    ]


@pytest.mark.parametrize(
    "config",
    [
        'ignore = ["ONC000"]',
        '[tool.oncely.lint.allow]\nONC000 = ["nowhere.py"]',
        "[tool.oncely.lint.ONC001]\nstrict = true",
    ],
)
def test_a_changed_configuration_parses_everything_again(
    tmp_path: Path, parsed: list[str], config: str
) -> None:
    root = _project(tmp_path)
    _run(root)
    parsed.clear()
    _project(root, config)
    _run(root)
    assert sorted(parsed) == ["a.py", "b.py", "c.py"]


@pytest.mark.parametrize("changed", ["_lint_code_digest", "_python_version"])
def test_other_lint_code_or_another_python_parses_everything_again(
    tmp_path: Path, parsed: list[str], monkeypatch: pytest.MonkeyPatch, changed: str
) -> None:
    root = _project(tmp_path)
    _run(root)
    parsed.clear()
    monkeypatch.setattr(lint_cache, changed, lambda: "another")
    _run(root)
    assert sorted(parsed) == ["a.py", "b.py", "c.py"]


def test_findings_come_back_under_the_path_of_this_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parsed: list[str]
) -> None:
    root = _project(tmp_path)
    (root / "src").mkdir()
    (root / "pkg").rename(root / "src" / "pkg")
    _run(root)
    parsed.clear()
    monkeypatch.chdir(root / "src")  # pkg/b.py, as src/pkg/b.py was: module pkg.b
    config = read_config(root / "pyproject.toml")
    cache = LintCache(config, enabled_codes(config))
    findings = lint_files([Path("pkg/b.py")], config, cache=cache)
    assert parsed == []
    assert [(f.path, f.code) for f in findings] == [("pkg/b.py", "ONC001")]


def test_a_file_shown_as_another_module_is_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parsed: list[str]
) -> None:
    """From pkg/, pkg/b.py is module b, not pkg.b: rules that resolve relative imports or
    boundaries by the module name (ONC201) may find otherwise."""
    root = _project(tmp_path)
    _run(root)
    parsed.clear()
    monkeypatch.chdir(root / "pkg")
    config = read_config(root / "pyproject.toml")
    findings = lint_files([Path("b.py")], config, cache=LintCache(config, enabled_codes(config)))
    assert parsed == ["b.py"]
    assert [(f.path, f.code) for f in findings] == [("b.py", "ONC001")]


def test_a_damaged_cache_is_an_empty_one(tmp_path: Path, parsed: list[str]) -> None:
    root = _project(tmp_path)
    first = _run(root)
    document = root / CACHE_DIR / "findings.json"
    damages = ["{not json", json.dumps({"format": lint_cache._FORMAT, "entries": []})]
    for damage in [*damages, json.dumps({"format": lint_cache._FORMAT - 1})]:
        _write_sealed(document, damage)
        parsed.clear()
        assert _run(root) == first
        assert sorted(parsed) == ["a.py", "b.py", "c.py"]
    entries = _entries(document)
    entries["a.py"]["findings"] = [["one", 2]]
    _write_sealed(document, json.dumps({"format": lint_cache._FORMAT, "entries": entries}))
    parsed.clear()
    assert _run(root) == first
    assert parsed == ["a.py"]


def test_entries_of_deleted_files_are_dropped(tmp_path: Path) -> None:
    root = _project(tmp_path)
    _run(root)
    (root / "pkg" / "c.py").unlink()
    (root / "d.py").write_text("z = 3\n")
    _run(root)
    entries = _entries(root / CACHE_DIR / "findings.json")
    assert sorted(entries) == ["a.py", "d.py", "pkg/b.py"]


def test_the_command_caches_beside_pyproject_unless_told_not_to(tmp_path: Path) -> None:
    root = _project(tmp_path)
    uncached = CliRunner().invoke(main, ["lint", "--no-cache", str(root)])
    assert uncached.exit_code == 1
    assert not (root / ".oncely_cache").exists()
    cached = CliRunner().invoke(main, ["lint", str(root)])
    assert (cached.exit_code, cached.stdout) == (1, uncached.stdout)
    assert (root / CACHE_DIR / "findings.json").is_file()
    assert (root / ".oncely_cache" / ".gitignore").read_text().splitlines()[-1] == "*"
    again = CliRunner().invoke(main, ["lint", str(root)])
    assert (again.exit_code, again.stdout) == (1, uncached.stdout)


def test_a_cache_that_cannot_be_written_costs_only_speed(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / ".oncely_cache").write_text("a file where the directory would go\n")
    first = _run(root)
    assert [f.code for f in first] == ["ONC000", "ONC001"]
    assert _run(root) == first


def test_a_file_whose_size_mtime_and_inode_are_unchanged_is_not_read(
    tmp_path: Path, parsed: list[str], read: list[str]
) -> None:
    root = _project(tmp_path)
    past = time.time_ns() - 100 * 10**9
    for name in FILES:
        _set_mtime(root / name, past)
    first = _run(root)
    assert sorted(read) == ["a.py", "b.py", "c.py"]
    assert [p.name for p in (root / CACHE_DIR).iterdir()] == ["findings.json"]
    read.clear()
    parsed.clear()
    assert _run(root) == first
    assert (read, parsed) == ([], [])
    # Like git, a rewrite that keeps size, mtime and inode goes unseen: not even opened.
    (root / "pkg" / "c.py").write_text("y = (\n")
    _set_mtime(root / "pkg" / "c.py", past)
    assert _run(root) == first
    assert (read, parsed) == ([], [])
    # Touched: read again, and parsed because its bytes changed.
    _set_mtime(root / "pkg" / "c.py", past + 10**9)
    assert [(f.path, f.code) for f in _run(root)][-1] == ("pkg/c.py", "ONC001")
    assert (read, parsed) == (["c.py"], ["c.py"])


def test_a_touched_file_is_read_once_and_not_parsed(
    tmp_path: Path, parsed: list[str], read: list[str]
) -> None:
    root = _project(tmp_path)
    past = time.time_ns() - 100 * 10**9
    for name in FILES:
        _set_mtime(root / name, past)
    first = _run(root)
    read.clear()
    parsed.clear()
    _set_mtime(root / "a.py", past + 10**9)
    assert _run(root) == first
    assert (read, parsed) == (["a.py"], [])
    read.clear()
    assert _run(root) == first
    assert (read, parsed) == ([], [])


def test_a_file_no_older_than_the_run_that_read_it_is_read_every_time(
    tmp_path: Path, parsed: list[str], read: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Racily clean: a write made in the tick of the file system's clock in which the run
    read the file keeps its mtime, so a stat from that tick (or later) is never trusted."""
    root = _project(tmp_path)
    clock = time.time_ns() - 100 * 10**9
    monkeypatch.setattr(lint_cache, "file_system_time", lambda folder: clock)
    for name in FILES:
        _set_mtime(root / name, clock - 1)
    racy = root / "pkg" / "c.py"
    _set_mtime(racy, clock)
    _run(root)
    entries = _entries(root / CACHE_DIR / "findings.json")
    assert [entries[name]["stat"] is None for name in FILES] == [False, False, True]
    read.clear()
    parsed.clear()
    assert [f.path for f in _run(root)] == ["a.py", "pkg/b.py"]
    assert (read, parsed) == (["c.py"], [])
    racy.write_text("y = (\n")  # the same size, in place: the same inode
    _set_mtime(racy, clock)
    assert [(f.path, f.code) for f in _run(root)][-1] == ("pkg/c.py", "ONC001")
