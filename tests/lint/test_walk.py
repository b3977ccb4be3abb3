"""What linting one file costs: one walk of its tree, the tokenizer only when it may suppress."""

from __future__ import annotations

import ast
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from oncely.lint import LintConfig, lint_source
from oncely.lint.rules import Context, Rule, all_rules

PLAIN = """\
import os

def handler(event):
    total = sum(len(part) for part in event.parts)
    return os.path.join(event.root, str(total))
"""


@pytest.fixture
def tokenized(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources the tokenizer was run on."""
    calls: list[str] = []
    real: Callable[..., Iterator[tokenize.TokenInfo]] = tokenize.generate_tokens

    def counting(readline: Callable[[], str]) -> Iterator[tokenize.TokenInfo]:
        lines = list(iter(readline, ""))
        calls.append("".join(lines))
        return real(iter(lines).__next__)

    monkeypatch.setattr(tokenize, "generate_tokens", counting)
    return calls


def test_a_file_that_never_says_oncely_is_not_tokenized(
    tmp_path: Path, tokenized: list[str]
) -> None:
    config = LintConfig(root=tmp_path)
    assert lint_source(tmp_path / "plain.py", PLAIN, config) == []
    assert tokenized == []
    suppressed = "x = 1  # ONCELY : Allow ONC101\n"
    findings = lint_source(tmp_path / "suppressed.py", suppressed, config)
    assert [f.code for f in findings] == ["ONC000"]
    assert tokenized == [suppressed]


def test_the_rules_share_one_walk_and_nothing_walks_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walks: list[ast.AST] = []
    real: Callable[[ast.AST], Iterator[ast.AST]] = ast.walk

    def counting(node: ast.AST) -> Iterator[ast.AST]:
        walks.append(node)
        return real(node)

    monkeypatch.setattr(ast, "walk", counting)
    assert lint_source(tmp_path / "plain.py", PLAIN, LintConfig(root=tmp_path)) == []
    assert walks == []


class _Recorder(Rule):
    """Records the names and calls it is shown."""

    code = "ONC990"
    name = "recorder"
    message = "seen"
    violating = clean = "x = 1\n"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.seen: list[str] = []

    def visit_Name(self, node: ast.Name, context: Context) -> None:
        self.seen.append(node.id)

    def visit_Call(self, node: ast.Call, context: Context) -> None:
        self.seen.append("call")

    def visit_NotANode(self, node: ast.AST, context: Context) -> None:
        raise AssertionError("only ast classes are dispatched")


def test_each_node_reaches_its_class_handlers_in_ast_walk_order(tmp_path: Path) -> None:
    source = "f(a, g(b))\nc = d\n"
    rule = _Recorder()
    lint_source(tmp_path / "m.py", source, LintConfig(root=tmp_path), [rule])
    expected = [
        "call" if isinstance(node, ast.Call) else node.id
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call | ast.Name)
    ]
    assert rule.seen == expected == ["call", "c", "d", "f", "a", "call", "g", "b"]


def test_a_rule_allowed_in_a_file_is_not_shown_it(tmp_path: Path) -> None:
    config = LintConfig(root=tmp_path, allow={"ONC990": ("allowed/*",)})
    rule = _Recorder()
    lint_source(tmp_path / "allowed" / "m.py", "a\n", config, [rule])
    assert rule.seen == []
    lint_source(tmp_path / "other" / "m.py", "a\n", config, [rule])
    assert rule.seen == ["a"]


class _Triggered(_Recorder):
    """A recorder that can only fire where the text says 'needle'."""

    triggers = ("needle",)


def test_a_rule_is_not_shown_a_file_without_its_triggers(tmp_path: Path) -> None:
    config = LintConfig(root=tmp_path)
    rule = _Triggered()
    lint_source(tmp_path / "m.py", "a = b\n", config, [rule])
    assert rule.seen == []
    lint_source(tmp_path / "m.py", "needle = b\n", config, [rule])
    assert rule.seen == ["needle", "b"]
    lint_source(tmp_path / "m.py", "c = 'café'  # déjà vu\n", config, [rule])
    assert rule.seen == ["needle", "b"]


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("\uff4e\uff45\uff45\uff44\uff4c\uff45 = b\n", True),  # full-width letters
        ("x = \U0001d427eedle\n", True),  # a mathematical bold n
        ("x = \u00e9\uff3fneedle\n", True),  # a full-width low line: one name, \u00e9_needle
        ("x = ne\ufb00dle\n", False),  # an "ff" ligature: neffdle, no trigger
        ("caf\u00e9 = 1\n", False),
    ],
    ids=["full-width", "math-bold", "full-width-low-line", "ligature", "none"],
)
def test_a_trigger_spelled_beyond_ascii_is_found_as_the_parser_reads_it(
    tmp_path: Path, source: str, shown: bool
) -> None:
    """The parser normalises identifiers (NFKC): a trigger can be spelled in other characters."""
    rule = _Triggered()
    lint_source(tmp_path / "m.py", source, LintConfig(root=tmp_path), [rule])
    assert bool(rule.seen) is shown
    assert any("needle" in name for name in rule.seen) is shown


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_a_rule_is_inert_exactly_when_its_documentation_says_so(rule: type[Rule]) -> None:
    """A rule that needs options and has none can fire nowhere, so the walk skips it."""
    assert rule().inert is ("inert" in (rule.__doc__ or "").lower())
    assert rule(rule.example_options).inert is False


class _Inert(_Recorder):
    @property
    def inert(self) -> bool:
        return True


def test_an_inert_rule_is_not_walked(tmp_path: Path) -> None:
    rule = _Inert()
    lint_source(tmp_path / "m.py", "a = b\n", LintConfig(root=tmp_path), [rule])
    assert rule.seen == []


def test_a_file_no_enabled_rule_can_fire_in_is_parsed_but_not_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oncely.lint import engine

    walked: list[ast.AST] = []
    real = engine._visit
    monkeypatch.setattr(
        engine, "_visit", lambda tree, *rest: walked.append(tree) or real(tree, *rest)
    )
    config = LintConfig(root=tmp_path)
    rule = _Triggered()
    assert lint_source(tmp_path / "m.py", "a = b\n", config, [rule]) == []
    assert walked == []
    assert [f.code for f in lint_source(tmp_path / "m.py", "a = (\n", config, [rule])] == ["ONC001"]
    lint_source(tmp_path / "m.py", "needle = b\n", config, [rule])
    assert len(walked) == 1
