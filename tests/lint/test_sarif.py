"""`oncely lint --format sarif`: a SARIF 2.1.0 log that the official schema accepts.

The schema is the OASIS SARIF 2.1.0 schema (errata01), vendored beside this file from the OASIS
sarif-spec repository (Schemata/sarif-schema-2.1.0.json); the digest below pins that copy.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
from click.testing import CliRunner

from oncely.cli import main
from oncely.lint import Finding, all_rules
from oncely.lint.reporters import sarif_log

SCHEMA_FILE = Path(__file__).with_name("sarif-schema-2.1.0.json")
SCHEMA_SHA256 = "ddddcccbf95c7c50c037b5b07eff4140556278ca574ff374db46786b5fce7949"


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.oncely.lint]\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a b.py").write_text("x = 1  # oncely: allow ONC101\n")
    (tmp_path / "pkg" / "broken.py").write_text("def f(:\n")
    (tmp_path / "clean.py").write_text("y = 2\n")
    return tmp_path


def _sarif(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, ["lint", "--format", "sarif", *args])
    return result.exit_code, json.loads(result.stdout)


def test_the_vendored_schema_is_the_official_one() -> None:
    assert hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest() == SCHEMA_SHA256
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["id"].startswith("https://docs.oasis-open.org/sarif/sarif/v2.1.0/")


def test_findings_as_sarif_validate_against_the_schema(
    tmp_path: Path, validator: jsonschema.protocols.Validator
) -> None:
    root = _project(tmp_path)
    status, log = _sarif(tmp_path, str(root))
    assert status == 1
    validator.validate(log)
    assert log["version"] == "2.1.0"
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "oncely"
    assert [rule["id"] for rule in driver["rules"]] == [rule.code for rule in all_rules()]
    for descriptor, rule in zip(driver["rules"], all_rules(), strict=True):
        assert descriptor["name"] == rule.name
        assert descriptor["shortDescription"]["text"] == rule.message
        assert descriptor["fullDescription"]["text"]
    results = [
        (
            r["ruleId"],
            r["level"],
            r["locations"][0]["physicalLocation"]["artifactLocation"],
            r["locations"][0]["physicalLocation"]["region"],
        )
        for r in run["results"]
    ]
    assert results == [
        (
            "ONC000",
            "error",
            {"uri": "pkg/a%20b.py", "uriBaseId": "%SRCROOT%"},
            {"startLine": 1, "startColumn": 8},
        ),
        (
            "ONC001",
            "error",
            {"uri": "pkg/broken.py", "uriBaseId": "%SRCROOT%"},
            {"startLine": 1, "startColumn": 7},
        ),
    ]
    assert run["results"][0]["message"]["text"].startswith("suppression of ONC101 without")
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert not urlsplit(uri).scheme
        assert " " not in uri
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == root.resolve().as_uri() + "/"


def test_a_clean_run_is_a_valid_log_with_no_results(
    tmp_path: Path, validator: jsonschema.protocols.Validator
) -> None:
    root = _project(tmp_path)
    status, log = _sarif(tmp_path, str(root / "clean.py"))
    assert status == 0
    validator.validate(log)
    assert log["runs"][0]["results"] == []


def test_uris_are_relative_to_the_config_root_wherever_the_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path)
    monkeypatch.chdir(root / "pkg")
    _, log = _sarif(tmp_path, "broken.py")
    [result] = log["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "pkg/broken.py", "uriBaseId": "%SRCROOT%"}


def test_only_the_rules_that_ran_are_described(tmp_path: Path) -> None:
    root = _project(tmp_path)
    _, log = _sarif(tmp_path, "--select", "ONC000,ONC001", "--ignore", "ONC000", str(root))
    [run] = log["runs"]
    assert [rule["id"] for rule in run["tool"]["driver"]["rules"]] == ["ONC001"]
    assert [(r["ruleId"], r["ruleIndex"]) for r in run["results"]] == [("ONC001", 0)]


def test_a_file_outside_the_root_gets_an_absolute_file_uri(
    tmp_path: Path, validator: jsonschema.protocols.Validator
) -> None:
    outside = tmp_path / "elsewhere" / "x.py"
    log = sarif_log([Finding(outside.as_posix(), 2, 1, "ONC001", "m")], all_rules(), tmp_path)
    validator.validate(log)
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": outside.as_uri()}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("level",), "fatal"),
        (("locations", 0, "physicalLocation", "region", "startLine"), 0),
        (("ruleIndex",), "first"),
        (("message",), {"markdown": "no text"}),
    ],
)
def test_the_schema_rejects_a_broken_result(
    tmp_path: Path, validator: jsonschema.protocols.Validator, path: tuple[Any, ...], value: Any
) -> None:
    """The validation above would mean nothing if the schema accepted anything."""
    log = sarif_log([Finding("a.py", 1, 1, "ONC000", "m")], all_rules(), tmp_path)
    validator.validate(log)
    broken = copy.deepcopy(log)
    target = broken["runs"][0]["results"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)
