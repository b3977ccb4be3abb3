"""Each rule fixture's exact output, ``path:line:col: CODE message``, against its snapshot
(``fixtures/<CODE>.snapshot``): the `# fires` lines say where a rule fires, the snapshot what it
says there. To rewrite the snapshots after a deliberate change of a message, run
``ONCELY_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/lint/test_snapshots.py`` and read the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _rule_support import FIXTURES, marked

from oncely.lint import LintConfig, all_rules, lint_source

RULES = {rule.code: rule for rule in all_rules()}
FIXTURE_FILES = sorted(FIXTURES.glob("ONC*.py"))


def _output(fixture: Path) -> list[str]:
    rule = RULES[fixture.stem]
    config = LintConfig(
        root=FIXTURES.parent,
        select=("ONC",),  # every rule: ONC002 judges the codes of the rules that ran
        options={rule.code: dict(rule.example_options)} if rule.example_options else {},
    )
    shown = Path("fixtures") / fixture.name
    findings = lint_source(shown, fixture.read_text(encoding="utf-8"), config)
    return [str(finding) for finding in sorted(findings) if finding.code == rule.code]


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=[f.stem for f in FIXTURE_FILES])
def test_a_fixture_says_exactly_what_its_snapshot_holds(fixture: Path) -> None:
    lines = _output(fixture)
    assert [int(line.split(":")[1]) for line in lines] == marked(fixture)
    snapshot = fixture.with_suffix(".snapshot")
    text = "".join(f"{line}\n" for line in lines)
    if os.environ.get("ONCELY_UPDATE_SNAPSHOTS") == "1":
        snapshot.write_text(text, encoding="utf-8")
    assert snapshot.read_text(encoding="utf-8") == text
