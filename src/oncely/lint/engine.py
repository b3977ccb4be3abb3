"""The lint engine: one parse and one walk per file, every enabled rule on that walk.

Suppressions are comments on the finding's line: ``# oncely: allow ONC101 -- reason``. One
without a reason still silences the finding but is itself a finding (ONC000): the exception is
written down or it is not an exception. A file that does not parse is one finding (ONC001) and
the run goes on.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from oncely.lint.config import LintConfig
from oncely.lint.finding import Finding
from oncely.lint.rules import Context, Rule, all_rules

SUPPRESSION = re.compile(
    r"#\s*oncely:\s*allow\s+(?P<codes>ONC\d{3}(?:\s*,\s*ONC\d{3})*)\s*(?:--\s*(?P<reason>.*))?$"
)
_SKIPPED_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "build", "dist"}
# Codes the engine itself reports (their rule files carry the documentation and examples).
SUPPRESSION_WITHOUT_REASON = "ONC000"
SYNTAX_ERROR = "ONC001"

Handler = Callable[[ast.AST, Context], None]


@dataclass(frozen=True)
class _Suppression:
    codes: frozenset[str]
    reason: str
    line: int
    col: int


def python_files(paths: Iterable[Path], config: LintConfig) -> Iterator[Path]:
    """The ``.py`` files named or under the directories named, minus excluded ones, sorted."""
    for path in paths:
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*.py")
                if not _SKIPPED_DIRS.intersection(p.relative_to(path).parts[:-1])
            )
        else:
            found = [path]
        yield from (p for p in found if not config.excluded(p))


def lint_files(
    paths: Iterable[Path], config: LintConfig, codes: Iterable[str] = ()
) -> list[Finding]:
    """Findings of the enabled rules (or only ``codes``, when given) in ``paths``, sorted."""
    rules = _rules(config, set(codes))
    findings: list[Finding] = []
    for path in python_files(paths, config):
        findings.extend(
            lint_source(path, path.read_text(encoding="utf-8", errors="replace"), config, rules)
        )
    return sorted(findings)


def lint_source(
    path: Path, source: str, config: LintConfig, rules: list[Rule] | None = None
) -> list[Finding]:
    """Findings in one file's ``source``, reported under ``path``."""
    chosen = _rules(config, set()) if rules is None else rules
    shown = config.relative(path) if path.is_absolute() else path.as_posix()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        if not config.enabled(SYNTAX_ERROR):
            return []
        return [
            Finding(
                shown,
                exc.lineno or 1,
                exc.offset or 1,
                SYNTAX_ERROR,
                f"syntax error, file not checked: {exc.msg}",
            )
        ]
    context = Context(
        path=shown, module=_module_name(shown), lines=source.splitlines(), root=config.root
    )
    handlers: dict[str, list[Handler]] = defaultdict(list)
    for rule in chosen:
        if config.allowed(rule.code, path):
            continue
        for name in dir(rule):
            if name.startswith("visit_"):
                handlers[name[len("visit_") :]].append(getattr(rule, name))
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            context.parents[child] = node
        for handle in handlers.get(type(node).__name__, ()):
            handle(node, context)
    return _apply_suppressions(context.findings, _suppressions(source), shown, config)


def _rules(config: LintConfig, only: set[str]) -> list[Rule]:
    return [
        rule(config.options.get(rule.code))
        for rule in all_rules()
        if (rule.code in only if only else config.enabled(rule.code))
    ]


def _suppressions(source: str) -> dict[int, _Suppression]:
    found: dict[int, _Suppression] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.COMMENT:
                continue
            match = SUPPRESSION.search(token.string)
            if match is None:
                continue
            codes = frozenset(c.strip() for c in match["codes"].split(","))
            line, col = token.start
            found[line] = _Suppression(codes, (match["reason"] or "").strip(), line, col + 1)
    except (tokenize.TokenError, SyntaxError):
        pass  # the file parsed; a tokenizer quirk only costs its suppressions
    return found


def _apply_suppressions(
    findings: list[Finding], suppressions: dict[int, _Suppression], shown: str, config: LintConfig
) -> list[Finding]:
    kept: list[Finding] = []
    for finding in findings:
        suppression = suppressions.get(finding.line)
        if suppression is None or finding.code not in suppression.codes:
            kept.append(finding)
    if config.enabled(SUPPRESSION_WITHOUT_REASON):
        for suppression in suppressions.values():
            if not suppression.reason:
                codes = ", ".join(sorted(suppression.codes))
                kept.append(
                    Finding(
                        shown,
                        suppression.line,
                        suppression.col,
                        SUPPRESSION_WITHOUT_REASON,
                        f"suppression of {codes} without a reason; write "
                        f"'# oncely: allow {codes} -- why this is the one exception'",
                    )
                )
    return kept


def _module_name(shown: str) -> str:
    parts = [p for p in Path(shown).with_suffix("").parts if p not in {".", ""}]
    if parts and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)
