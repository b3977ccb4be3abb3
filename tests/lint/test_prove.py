"""`oncely lint --prove`: every enabled rule seen firing on its plant, and the tree untouched."""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from oncely.cli import main
from oncely.errors import ConfigurationError
from oncely.lint import Rule, all_rules, read_config
from oncely.lint import engine as lint_engine
from oncely.lint.prove import Proof, prove
from oncely.lint.rules.base import Context


class _CallsForbidden(Rule):
    """## What it does
    Finds calls to the configured ``names``.

    ## Why is this bad?
    A stand-in rule with options, for these tests.

    ## Example
    ```python
    forbidden()
    ```

    ## Use instead
    ```python
    allowed()
    ```
    """

    code = "ONC998"
    name = "calls-forbidden"
    message = "forbidden call"
    violating = "import os\n\nforbidden()\n"
    clean = "allowed()\n"
    example_options: Mapping[str, Any] = {"names": ["forbidden"]}

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        names = self.options.get("names", [])
        if not isinstance(names, list):
            raise ConfigurationError('ONC998: names must be a list, e.g. names = ["f"]')
        self.names = set(names)

    def visit_Call(self, node: ast.Call, context: Context) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in self.names:
            self.report(context, node)


class _OnlyInBilling(Rule):
    """## What it does
    Fires on every module of ``app.billing``.

    ## Why is this bad?
    A stand-in rule that covers one package only, for these tests.

    ## Example
    ```python
    x = 1
    ```

    ## Use instead
    ```python
    x = 1
    ```
    """

    code = "ONC997"
    name = "only-in-billing"
    message = "a billing module"
    violating = "x = 1\n"
    clean = "x = 1\n"

    def visit_Module(self, node: ast.Module, context: Context) -> None:
        if context.module.startswith("app.billing."):
            self.report(context, node.body[0])


def _project(root: Path, config: str = "", files: tuple[str, ...] = ("src/app/x.py",)) -> Path:
    (root / "pyproject.toml").write_text(f"[tool.oncely.lint]\n{config}\n")
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("y = 2\n")
    return root


def _tree(root: Path) -> list[tuple[str, str]]:
    return sorted(
        (
            path.relative_to(root).as_posix(),
            hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir",
        )
        for path in root.rglob("*")
    )


def _prove(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, ["lint", "--prove", *args])
    return result.exit_code, result.output.splitlines()


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules are these two stand-ins (the engine's discovery is replaced)."""
    monkeypatch.setattr(lint_engine, "all_rules", lambda: (_OnlyInBilling, _CallsForbidden))


def test_every_enabled_rule_is_proved_and_the_tree_is_untouched(tmp_path: Path) -> None:
    root = _project(tmp_path)
    before = _tree(root)
    status, lines = _prove(str(root / "src"))
    assert status == 0
    assert [line.split()[0] for line in lines] == [rule.code for rule in all_rules()]
    assert all(" proved: fired at src/app/oncely_prove_" in line for line in lines)
    assert lines[:2] == [
        "ONC000 proved: fired at src/app/oncely_prove_onc000.py:3",
        "ONC001 proved: fired at src/app/oncely_prove_onc001.py:1",
    ]
    assert _tree(root) == before


def test_only_enabled_rules_are_proved(tmp_path: Path) -> None:
    root = _project(tmp_path, 'select = ["ONC000", "ONC001"]\nignore = ["ONC001"]')
    assert _prove(str(root))[1] == ["ONC000 proved: fired at src/app/oncely_prove_onc000.py:3"]


def test_a_rule_excluded_everywhere_is_not_proved(tmp_path: Path) -> None:
    root = _project(tmp_path, 'exclude = ["*"]')
    status, lines = _prove(str(root))
    assert status == 1
    assert lines[0].startswith("ONC000 NOT PROVED: nowhere to plant it: every place")
    assert "exclude, allow.ONC000" in lines[0]


def test_a_rule_allowed_everywhere_it_would_go_is_not_proved(tmp_path: Path) -> None:
    root = _project(
        tmp_path, 'select = ["ONC000", "ONC001"]\n[tool.oncely.lint.allow]\nONC001 = ["src/*"]'
    )
    status, lines = _prove(str(root / "src"))
    assert status == 1
    assert lines == [
        "ONC000 proved: fired at src/app/oncely_prove_onc000.py:3",
        "ONC001 NOT PROVED: nowhere to plant it: every place the run looks is excluded or in "
        "the rule's allow list ([tool.oncely.lint] exclude, allow.ONC001)",
    ]


@pytest.mark.usefixtures("stand_ins")
def test_example_options_are_used_when_none_are_configured_and_the_line_says_so(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path, files=("app/billing/invoice.py",))
    status, lines = _prove(str(root))
    assert status == 0
    assert lines == [
        "ONC997 proved: fired at app/billing/oncely_prove_onc997.py:1",
        "ONC998 proved: fired at app/billing/oncely_prove_onc998.py:3 "
        "(with its example options; none are configured)",
    ]


@pytest.mark.usefixtures("stand_ins")
def test_configured_options_under_which_the_plant_does_not_fire_are_not_proved(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path, '[tool.oncely.lint.ONC998]\nnames = ["other"]', ("app/x.py",))
    status, lines = _prove("--select", "ONC", str(root))
    assert status == 1
    assert (
        "ONC998 NOT PROVED: cannot see its plant: planted at app/oncely_prove_onc998.py and 1 "
        "other place(s), it did not fire with the configured options"
    ) in lines


@pytest.mark.usefixtures("stand_ins")
def test_the_plant_is_tried_in_each_place_until_the_rule_fires(tmp_path: Path) -> None:
    files = ("app/__init__.py", "app/billing/__init__.py", "app/orders/x.py")
    config = read_config(_project(tmp_path, files=files) / "pyproject.toml")
    [proof, _] = prove([tmp_path], config)
    assert proof == Proof("ONC997", True, "app/billing/oncely_prove_onc997.py", 1)

    config = read_config(_project(tmp_path, 'exclude = ["app/billing/*"]', ()) / "pyproject.toml")
    [proof, _] = prove([tmp_path], config)
    assert not proof.proved
    assert proof.path == "app/oncely_prove_onc997.py"
    assert proof.detail == (
        "cannot see its plant: planted at app/oncely_prove_onc997.py and 2 other place(s), "
        "it did not fire"
    )


@pytest.mark.usefixtures("stand_ins")
def test_a_rule_refusing_its_options_is_a_usage_error(tmp_path: Path) -> None:
    root = _project(tmp_path, "[tool.oncely.lint.ONC998]\nnames = 3")
    result = CliRunner().invoke(main, ["lint", "--prove", str(root)])
    assert result.exit_code == 2
    assert "names must be a list" in result.output


def test_prove_reports_in_text_only(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["lint", "--prove", "--format", "json", str(tmp_path)])
    assert result.exit_code == 2
    assert "--prove reports in text only" in result.output


class _FiresOutsideThePlant(Rule):
    """## What it does
    Reports a line its file does not have.

    ## Why is this bad?
    A stand-in for a rule that fires, but not at its plant, for these tests.

    ## Example
    ```python
    x = 1
    ```

    ## Use instead
    ```python
    x = 1
    ```
    """

    code = "ONC996"
    name = "fires-outside-the-plant"
    message = "somewhere else"
    violating = "x = 1\n"
    clean = "x = 1\n"

    def visit_Module(self, node: ast.Module, context: Context) -> None:
        self.report(context, ast.Pass(lineno=99, col_offset=0))


def test_a_finding_that_is_not_at_a_line_of_the_plant_proves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lint_engine, "all_rules", lambda: (_FiresOutsideThePlant,))
    root = _project(tmp_path, files=("app/x.py",))
    status, lines = _prove(str(root))
    assert status == 1
    assert lines == [
        "ONC996 NOT PROVED: cannot see its plant: planted at app/oncely_prove_onc996.py and 1 "
        "other place(s), it did not fire"
    ]
