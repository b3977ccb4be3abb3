"""Which files a run lints, and the paths it knows them by: resolved once per directory, found as
``Path.rglob`` finds them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oncely.lint import LintConfig, lint_files, python_files
from oncely.lint.engine import _sources

SKIPPED = {".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "build", "dist"}


def _by_rglob(paths: list[Path], config: LintConfig) -> list[Path]:
    """What python_files returned when written with Path.rglob and Path.resolve (less folders
    named *.py, which it returned and then failed to read)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            files = sorted(
                p
                for p in path.rglob("*.py")
                if not SKIPPED.intersection(p.relative_to(path).parts[:-1]) and not p.is_dir()
            )
        else:
            files = [path]
        found += [p for p in files if not config.excluded(p)]
    return found


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project with the awkward cases: skipped folders, symlinks, names that sort oddly."""
    root = tmp_path / "project"
    for name in [
        "a.py",
        "a/b.py",
        "a.b/c.py",
        "A/z.py",
        "pkg/__init__.py",
        "pkg/build/gone.py",
        "pkg/__pycache__/gone.py",
        "build/top.py",
        "skip/me.py",
        ".hidden/h.py",
        "notes.txt",
    ]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x = 1\n")
    (root / "folder.py").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "far.py").write_text("y = 2\n")
    (root / "pkg" / "linked.py").symlink_to(tmp_path / "elsewhere" / "far.py")
    (root / "pkg" / "inside.py").symlink_to(root / "a" / "b.py")
    (root / "linked_dir").symlink_to(tmp_path / "elsewhere")
    (root / "pyproject.toml").write_text('[tool.oncely.lint]\nexclude = ["skip/*"]\n')
    return root


def test_the_files_are_those_rglob_finds_in_the_same_order(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = LintConfig(root=tree, exclude=("skip/*",))
    for paths in ([tree], [tree / "pkg", tree / "a.py"], [tree / "linked_dir"]):
        assert list(python_files(paths, config)) == _by_rglob(paths, config)
    monkeypatch.chdir(tree)
    for paths in ([Path(".")], [Path("pkg"), Path("./a")]):
        assert list(python_files(paths, config)) == _by_rglob(paths, config)


def test_each_file_is_known_by_the_paths_resolve_gives(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = LintConfig(root=tree)
    monkeypatch.chdir(tree / "pkg")
    for paths in ([tree], [Path("..")], [Path("."), Path("../a/b.py")], [tree / "linked_dir"]):
        for source in _sources(paths, config):
            path = Path(source.path)
            assert source.relative == config.relative(path), source
            shown = config.relative(path) if path.is_absolute() else path.as_posix()
            assert source.shown == shown, source
    relative = {s.path: s.relative for s in _sources([Path(".")], config)}
    assert relative["linked.py"] == (tree.parent / "elsewhere" / "far.py").resolve().as_posix()
    assert relative["inside.py"] == "a/b.py"


def test_a_symlinked_file_is_linted_where_it_points(tree: Path) -> None:
    (tree.parent / "elsewhere" / "far.py").write_text("def f(:\n")
    config = LintConfig(root=tree)
    findings = lint_files([tree / "pkg"], config)
    far = (tree.parent / "elsewhere" / "far.py").resolve().as_posix()
    assert [(f.path, f.code) for f in findings] == [(far, "ONC001")]
    assert os.path.islink(tree / "pkg" / "linked.py")
