"""The lint cache: unchanged files are not parsed again; any change to a file or the settings is."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from oncely.cli import main
from oncely.lint import Finding, LintConfig, lint_files, read_config
from oncely.lint import cache as lint_cache
from oncely.lint.cache import CACHE_DIR, LintCache
from oncely.lint.engine import enabled_rules

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


def _run(root: Path, config: LintConfig | None = None) -> list[Finding]:
    config = config or read_config(root / "pyproject.toml")
    return lint_files([root], config, cache=LintCache(config, enabled_rules(config)))


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


def test_another_oncely_version_parses_everything_again(
    tmp_path: Path, parsed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path)
    _run(root)
    parsed.clear()
    monkeypatch.setattr(lint_cache, "oncely_version", lambda: "99.0")
    _run(root)
    assert sorted(parsed) == ["a.py", "b.py", "c.py"]


def test_findings_come_back_under_the_path_of_this_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parsed: list[str]
) -> None:
    root = _project(tmp_path)
    _run(root)
    parsed.clear()
    monkeypatch.chdir(root / "pkg")
    config = read_config(root / "pyproject.toml")
    findings = lint_files([Path("b.py")], config, cache=LintCache(config, enabled_rules(config)))
    assert parsed == []
    assert [(f.path, f.code) for f in findings] == [("b.py", "ONC001")]


def test_a_damaged_cache_is_an_empty_one(tmp_path: Path, parsed: list[str]) -> None:
    root = _project(tmp_path)
    first = _run(root)
    document = root / CACHE_DIR / "findings.json"
    for damage in ("{not json", '{"format": 1, "entries": []}', json.dumps({"format": 0})):
        document.write_text(damage)
        parsed.clear()
        assert _run(root) == first
        assert sorted(parsed) == ["a.py", "b.py", "c.py"]
    entries = json.loads(document.read_text())["entries"]
    entries["a.py"]["findings"] = [["one", 2]]
    document.write_text(json.dumps({"format": 1, "entries": entries}))
    parsed.clear()
    assert _run(root) == first
    assert parsed == ["a.py"]


def test_entries_of_deleted_files_are_dropped(tmp_path: Path) -> None:
    root = _project(tmp_path)
    _run(root)
    (root / "pkg" / "c.py").unlink()
    (root / "d.py").write_text("z = 3\n")
    _run(root)
    entries = json.loads((root / CACHE_DIR / "findings.json").read_text())["entries"]
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
