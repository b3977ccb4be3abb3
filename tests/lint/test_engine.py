"""The lint engine and `oncely lint`: suppressions, syntax errors, configuration, exit codes."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from oncely.cli import main
from oncely.errors import ConfigurationError
from oncely.lint import LintConfig, all_rules, lint_files, read_config
from oncely.lint import parallel as lint_parallel
from oncely.lint.engine import PARALLEL_MIN_FILES, enabled_rules
from oncely.lint.reporters import rule_reference
from oncely.lint.rules import RULE_MODULE, rule_codes

RULES_DIR = Path(__file__).resolve().parents[2] / "src" / "oncely" / "lint" / "rules"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "lint.md"


def _project(tmp_path: Path, config: str = "", **files: str) -> Path:
    """pyproject.toml with ``config``, and ``files`` (``a_py="..."`` is ``a.py``)."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.oncely.lint]\n{config}\n")
    for name, text in files.items():
        path = tmp_path / f"{name.removesuffix('_py')}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_every_rule_file_holds_one_documented_rule_whose_code_matches_its_name() -> None:
    modules = sorted(p.stem for p in RULES_DIR.glob("onc*.py"))
    assert all(RULE_MODULE.fullmatch(m) for m in modules), modules
    rules = all_rules()
    assert [r.code.lower() for r in rules] == [m.split("_")[0] for m in modules]
    assert rule_codes() == tuple(r.code for r in rules)
    assert len({r.code for r in rules}) == len(rules)
    for rule in rules:
        doc = rule.__doc__ or ""
        for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
            assert section in doc, f"{rule.code} lacks {section!r}"
        assert rule.violating.strip()
        assert rule.clean.strip()
        assert re.fullmatch(r"[a-z0-9-]+", rule.name)


def test_a_syntax_error_is_a_finding_and_the_run_goes_on(tmp_path: Path) -> None:
    root = _project(tmp_path, broken_py="def f(:\n", fine_py="x = 1\n")
    findings = lint_files([root], read_config(root / "pyproject.toml"))
    assert [(f.path, f.line, f.code) for f in findings] == [("broken.py", 1, "ONC001")]


def test_a_suppression_without_reason_is_itself_a_finding(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        a_py="x = 1  # oncely: allow ONC101\ny = 2  # oncely: allow ONC101 -- the one place\n",
    )
    findings = lint_files([root], read_config(root / "pyproject.toml"))
    # Line 2's reason is written, but ONC101 does not fire there: a stale suppression (ONC002).
    assert [(f.line, f.code) for f in findings] == [(1, "ONC000"), (2, "ONC002")]
    assert "-- why this is the one exception" in findings[0].message


@pytest.mark.parametrize(
    ("config", "names"),
    [
        ("colour = 1", "unknown key 'colour'"),
        ('select = "ONC1"', "select must be a list of strings"),
        ("allow = 3", "allow must be a table"),
    ],
)
def test_bad_configuration_names_the_key_and_the_fix(
    tmp_path: Path, config: str, names: str
) -> None:
    root = _project(tmp_path, config)
    with pytest.raises(ConfigurationError, match=names):
        read_config(root / "pyproject.toml")
    result = CliRunner().invoke(main, ["lint", str(root)])
    assert result.exit_code == 2
    assert names in result.output


def test_exit_status_and_formats(tmp_path: Path) -> None:
    root = _project(tmp_path, a_py="x = 1  # oncely: allow ONC101\n", b_py="y = 2\n")
    runner = CliRunner()
    clean = runner.invoke(main, ["lint", str(root / "b.py")])
    assert (clean.exit_code, clean.output) == (0, "")
    found = runner.invoke(main, ["lint", str(root)])
    assert found.exit_code == 1
    assert found.stdout.splitlines() == [
        "a.py:1:8: ONC000 suppression of ONC101 without a reason; write "
        "'# oncely: allow ONC101 -- why this is the one exception' "
        "(see oncely lint --explain ONC000)"
    ]
    document = json.loads(runner.invoke(main, ["lint", "--format", "json", str(root)]).stdout)
    assert [(d["path"], d["code"]) for d in document] == [("a.py", "ONC000")]
    ignored = runner.invoke(main, ["lint", "--ignore", "ONC000", str(root)])
    assert ignored.exit_code == 0
    unknown = runner.invoke(main, ["lint", "--select", "ONC999", str(root)])
    assert unknown.exit_code == 2
    assert "no rule has that code" in unknown.output


def test_each_rule_is_built_with_its_own_options(tmp_path: Path) -> None:
    config = LintConfig(root=tmp_path, options={"ONC000": {"note": "kept"}})
    rules = {rule.code: rule for rule in enabled_rules(config)}
    assert rules["ONC000"].options == {"note": "kept"}
    assert rules["ONC001"].options == {}


def test_a_byte_order_mark_and_crlf_line_ends_are_read_as_python_reads_them(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    (root / "bom.py").write_bytes(b"\xef\xbb\xbfx = 1\r\ny = 2  # oncely: allow ONC101\r\n")
    findings = lint_files([root], read_config(root / "pyproject.toml"))
    assert [(f.path, f.line, f.code) for f in findings] == [("bom.py", 2, "ONC000")]


def _many(root: Path) -> Path:
    for index in range(PARALLEL_MIN_FILES + 40):
        text = ("def f(:\n", "x = 1  # oncely: allow ONC101\n", "y = 2\n")[index % 3]
        path = root / f"pkg{index % 7}" / f"m{index:03}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(("\n" * (index % 5)) + text)
    return root


def test_a_parallel_run_finds_what_a_serial_one_does_in_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _many(_project(tmp_path))
    config = read_config(root / "pyproject.toml")
    forks: list[int] = []
    real = os.fork

    def counting() -> int:
        forks.append(1)
        return real()

    monkeypatch.setattr(os, "fork", counting)
    # Forking is for a process with one thread. Another test's idle pool thread (the _async
    # calls' executor lives as long as the process) turned this run to the spawned pool.
    monkeypatch.setattr(lint_parallel.threading, "active_count", lambda: 1)
    serial = lint_files([root], config, jobs=1)
    assert forks == []
    parallel = lint_files([root], config, jobs=3)
    assert forks == [1, 1]  # three jobs: two children, and this process
    assert len(serial) == sum(1 for index in range(PARALLEL_MIN_FILES + 40) if index % 3 != 2)
    assert parallel == serial


def test_batches_a_child_took_and_did_not_report_are_linted_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oncely.lint import engine

    root = _many(_project(tmp_path))
    config = read_config(root / "pyproject.toml")
    serial = lint_files([root], config, jobs=1)
    parent, real = os.getpid(), engine._lint

    def dying_in_children(*args: Any) -> Any:
        if os.getpid() != parent:
            raise RuntimeError("a child dies after taking a batch")
        return real(*args)

    monkeypatch.setattr(engine, "_lint", dying_in_children)
    assert lint_files([root], config, jobs=2) == serial


def test_where_forking_is_unsafe_a_spawned_pool_shares_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _many(_project(tmp_path))
    config = read_config(root / "pyproject.toml")
    serial = lint_files([root], config, jobs=1)
    pools: list[int | None] = []

    class CountingPool(ProcessPoolExecutor):
        def __init__(self, max_workers: int | None = None, **kwargs: Any) -> None:
            pools.append(max_workers)
            super().__init__(max_workers, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", CountingPool)
    monkeypatch.setattr(lint_parallel.threading, "active_count", lambda: 2)  # another thread runs
    assert lint_files([root], config, jobs=2) == serial
    assert pools == [1]


def test_a_small_run_stays_in_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path, **{f"m{i}_py": "x = 1\n" for i in range(PARALLEL_MIN_FILES)})
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", None)
    monkeypatch.setattr(os, "fork", None)
    assert lint_files([root], read_config(root / "pyproject.toml"), jobs=2) == []


def test_docs_describe_every_rule_from_its_docstring() -> None:
    """docs/lint.md's table of rules, a page per rule under docs/lint/ and the rules' entries in
    mkdocs.yml's nav are written from the docstrings; to rewrite them, run
    ``ONCELY_UPDATE_DOCS=1 pytest tests/lint/test_engine.py -k docs``."""
    from oncely.lint.reporters import rule_page

    rules = all_rules()
    pages = DOCS.parent / "lint"
    mkdocs = DOCS.parents[1] / "mkdocs.yml"
    nav = "".join(f"          - {rule.code} {rule.name}: lint/{rule.code}.md\n" for rule in rules)
    # (file, begin and end markers, what the lines between them must be)
    sections = [
        (DOCS, "<!-- rules: begin -->\n", "<!-- rules: end -->\n", rule_reference(rules)),
        (mkdocs, "          # lint rules: begin\n", "          # lint rules: end\n", nav),
    ]
    wanted = {pages / f"{rule.code}.md": rule_page(rule) for rule in rules}
    update = os.environ.get("ONCELY_UPDATE_DOCS") == "1"
    stale: list[str] = []
    for path, begin, end, expected in sections:
        document = path.read_text(encoding="utf-8")
        head, rest = document.split(begin)
        written, tail = rest.split(end)
        if written != expected:
            if update:
                path.write_text(f"{head}{begin}{expected}{end}{tail}", encoding="utf-8")
            else:
                stale.append(str(path.relative_to(DOCS.parents[1])))
    for path in sorted(set(pages.glob("*.md")) - set(wanted)):  # the page of a removed rule
        if update:
            path.unlink()
        else:
            stale.append(f"docs/lint/{path.name} (no rule has this code)")
    for path, expected in wanted.items():
        if not path.is_file() or path.read_text(encoding="utf-8") != expected:
            if update:
                pages.mkdir(exist_ok=True)
                path.write_text(expected, encoding="utf-8")
            else:
                stale.append(str(path.relative_to(DOCS.parents[1])))
    assert not stale, f"out of date: {', '.join(stale)}; see this test's docstring"


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_cycle_collector_is_paused_while_files_are_parsed_and_only_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    import gc

    from oncely.lint import engine

    root = _many(_project(tmp_path))
    paused: list[bool] = []
    real = engine._lint

    def recording(*args: Any) -> Any:
        paused.append(not gc.isenabled())
        return real(*args)

    monkeypatch.setattr(engine, "_lint", recording)
    assert gc.isenabled()
    lint_files([root], read_config(root / "pyproject.toml"), jobs=jobs)
    assert paused
    assert all(paused)
    assert gc.isenabled()
