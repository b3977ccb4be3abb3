"""Findings people can act on (issue 23): stale suppressions are findings (ONC002), text output
says how to suppress and where the rule's page is, SARIF links the pages and keeps suppressed
results, and a file newer than the running Python is a note with the version it needs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _rule_support import FIXTURES, marked
from click.testing import CliRunner

from oncely.cli import main
from oncely.errors import ConfigurationError
from oncely.lint import LintConfig, lint_files, lint_source, read_config
from oncely.lint.rules.onc002_unused_suppression import UnusedSuppression

SCHEMA_FILE = Path(__file__).with_name("sarif-schema-2.1.0.json")


def _project(tmp_path: Path, config: str = "", **files: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.oncely.lint]\n{config}\n")
    for name, text in files.items():
        (tmp_path / f"{name.removesuffix('_py')}.py").write_text(text)
    return tmp_path


def _onc002(source: str, *also: str) -> list[int]:
    config = LintConfig(root=Path("/nonexistent"), select=("ONC002", *also))
    return [f.line for f in lint_source(Path("m.py"), source, config) if f.code == "ONC002"]


def test_the_onc002_fixture_fires_exactly_at_its_marked_lines() -> None:
    fixture = FIXTURES / "ONC002.py"
    assert _onc002(fixture.read_text(), "ONC101", "ONC102") == marked(fixture)


def test_onc002_examples_fire_and_stay_clean() -> None:
    assert _onc002(UnusedSuppression.violating, "ONC101") == [3]
    assert _onc002(UnusedSuppression.clean, "ONC101") == []


def test_a_stale_suppression_names_the_code_and_what_to_do() -> None:
    config = LintConfig(root=Path("/nonexistent"))
    [finding] = lint_source(Path("m.py"), "x = 1  # oncely: allow ONC101 -- was a loop\n", config)
    assert finding.code == "ONC002"
    assert finding.message == (
        "unused suppression: ONC101 did not fire on this line; remove it from the comment "
        "(or the comment)"
    )


def test_text_output_says_how_to_suppress_and_ends_with_the_rules_page(tmp_path: Path) -> None:
    root = _project(tmp_path, a_py="import time\nwhile True:\n    work()\n    time.sleep(1)\n")
    result = CliRunner().invoke(main, ["lint", "--no-cache", str(root)])
    [line] = result.stdout.splitlines()
    assert line.startswith("a.py:2:1: ONC101 ad-hoc recurring timer: `while True` repeats work")
    assert "schedule it with @app.job(oncely.every(...)) instead" in line
    assert "write '# oncely: allow ONC101 -- why' here" in line
    assert line.endswith("(see oncely lint --explain ONC101)")
    assert result.exit_code == 1


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_sarif_links_each_rule_and_keeps_suppressed_results_with_their_reason(
    tmp_path: Path, validator: jsonschema.protocols.Validator
) -> None:
    root = _project(
        tmp_path,
        a_py="import time\n\nwhile True:  # oncely: allow ONC101 -- the SDK's loop, INC-42\n"
        "    work()\n    time.sleep(1)\n",
    )
    result = CliRunner().invoke(main, ["lint", "--no-cache", "--format", "sarif", str(root)])
    log: dict[str, Any] = json.loads(result.stdout)
    validator.validate(log)
    run = log["runs"][0]
    assert all("helpUri" not in rule for rule in run["tool"]["driver"]["rules"])  # no site set
    assert all(rule["help"]["text"] for rule in run["tool"]["driver"]["rules"])
    [kept] = run["results"]
    assert (kept["ruleId"], kept["locations"][0]["physicalLocation"]["region"]["startLine"]) == (
        "ONC101",
        3,
    )
    assert kept["suppressions"] == [{"kind": "inSource", "justification": "the SDK's loop, INC-42"}]
    assert result.exit_code == 0  # a suppressed finding does not fail the run
    text = CliRunner().invoke(main, ["lint", "--no-cache", str(root)])
    assert (text.exit_code, text.stdout) == (0, "")  # nor is it shown as text


TEMPLATE_STRING = 'name = "x"\ngreeting = t"hello {name}"\n'


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="this Python reads template strings")
def test_newer_syntax_is_a_note_naming_the_version_and_does_not_fail_the_run(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path, a_py=TEMPLATE_STRING)
    result = CliRunner().invoke(main, ["lint", "--no-cache", str(root)])
    assert result.exit_code == 0
    [line] = result.stdout.splitlines()
    running = "{}.{}".format(*sys.version_info[:2])
    assert line.startswith(
        f"a.py:2:13: ONC001 note: file not checked: it needs Python 3.14 (invalid syntax) and "
        f"this is Python {running}; run oncely lint under Python 3.14 or newer to check it"
    )
    assert "1 note(s): not failing the run" in result.stderr


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this Python reads PEP 701 f-strings")
def test_a_pep_701_f_string_under_an_older_python_is_a_note_needing_3_12(tmp_path: Path) -> None:
    root = _project(tmp_path, a_py='d = {"k": 1}\nx = f"{d["k"]}"\n')
    [finding] = lint_files([root], read_config(root / "pyproject.toml"))
    assert (finding.code, finding.level) == ("ONC001", "note")
    assert "it needs Python 3.12" in finding.message


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="this Python reads template strings")
@pytest.mark.parametrize(
    ("config", "project"),
    [('target-version = "py313"', ""), ("", '[project]\nrequires-python = ">=3.11"\n')],
    ids=["target-version", "requires-python"],
)
def test_syntax_newer_than_the_target_version_is_a_syntax_error(
    tmp_path: Path, config: str, project: str
) -> None:
    root = _project(tmp_path, config, a_py=TEMPLATE_STRING)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(project + text)
    result = CliRunner().invoke(main, ["lint", "--no-cache", str(root)])
    assert result.exit_code == 1
    [line] = result.stdout.splitlines()
    assert "ONC001 syntax error, file not checked: Python 3.14 syntax (invalid syntax)" in line
    assert "newer than target-version py31" in line


def test_a_bad_target_version_names_the_key_and_the_fix(tmp_path: Path) -> None:
    root = _project(tmp_path, 'target-version = "3.12"')
    with pytest.raises(ConfigurationError, match='target-version = "py312"'):
        read_config(root / "pyproject.toml")


def test_a_configured_docs_url_links_text_and_sarif_to_each_rules_page(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        'docs-url = "https://docs.example.org/oncely"',
        a_py="import time\nwhile True:\n    work()\n    time.sleep(1)\n",
    )
    text = CliRunner().invoke(main, ["lint", "--no-cache", str(root)])
    assert text.stdout.splitlines()[0].endswith(
        "(see https://docs.example.org/oncely/lint/ONC101/)"
    )
    sarif = CliRunner().invoke(main, ["lint", "--no-cache", "--format", "sarif", str(root)])
    rules = json.loads(sarif.stdout)["runs"][0]["tool"]["driver"]["rules"]
    assert all(r["helpUri"] == f"https://docs.example.org/oncely/lint/{r['id']}/" for r in rules)


def test_a_docs_url_that_is_no_address_is_a_configuration_error(tmp_path: Path) -> None:
    root = _project(tmp_path, 'docs-url = "oncely docs"', a_py="x = 1\n")
    result = CliRunner().invoke(main, ["lint", "--no-cache", str(root)])
    assert result.exit_code == 2
    assert "docs-url" in result.stderr


def test_explain_prints_the_rules_page_and_refuses_an_unknown_code() -> None:
    page = CliRunner().invoke(main, ["lint", "--explain", "onc101"])
    assert page.exit_code == 0
    assert page.stdout.startswith("# ONC101 ")
    assert "## What it does" in page.stdout
    unknown = CliRunner().invoke(main, ["lint", "--explain", "ONC999"])
    assert unknown.exit_code == 2
