"""The lint engine: one parse and one walk per file, every enabled rule on that walk.

Suppressions are comments on the finding's line: ``# oncely: allow ONC101 -- reason``. One
without a reason still silences the finding but is itself a finding (ONC000): the exception is
written down or it is not an exception. A file that does not parse is one finding (ONC001) and
the run goes on.

A run can keep findings in a `LintCache` (a file whose bytes and settings are unchanged is not
parsed again), and spreads the files it must parse over a process pool when there are more than
`PARALLEL_MIN_FILES` of them; either way the findings, and their order, are those of a serial run.
"""

from __future__ import annotations

import ast
import io
import multiprocessing
import os
import re
import sys
import threading
import tokenize
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import TYPE_CHECKING

from oncely.lint.config import LintConfig
from oncely.lint.finding import Finding
from oncely.lint.rules import Context, Rule, all_rules

if TYPE_CHECKING:
    from oncely.lint.cache import LintCache

SUPPRESSION = re.compile(
    r"#\s*oncely:\s*allow\s+(?P<codes>ONC\d{3}(?:\s*,\s*ONC\d{3})*)\s*(?:--\s*(?P<reason>.*))?$"
)
_SKIPPED_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "build", "dist"}
# Codes the engine itself reports (their rule files carry the documentation and examples).
SUPPRESSION_WITHOUT_REASON = "ONC000"
SYNTAX_ERROR = "ONC001"
#: Above this many files to parse, a run spreads them over a process pool; below it, starting
#: the workers costs more than it saves.
PARALLEL_MIN_FILES = 64

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
    paths: Iterable[Path],
    config: LintConfig,
    codes: Iterable[str] = (),
    *,
    cache: LintCache | None = None,
    jobs: int | None = None,
) -> list[Finding]:
    """Findings of the enabled rules (or only ``codes``, when given) in ``paths``, sorted.

    With ``cache``, a file whose findings it holds is not parsed, and the findings of the files
    that were parsed are saved to it. ``jobs`` caps the worker processes (default: the usable
    cores); with more than one and more than `PARALLEL_MIN_FILES` files to parse, the files are
    parsed in a process pool. Neither changes the findings nor their order.
    """
    rules = enabled_rules(config, codes)
    files = list(python_files(paths, config))
    found: list[list[Finding] | None] = [None] * len(files)
    keys: list[str] = [""] * len(files)
    pending: list[tuple[int, Path, str]] = []
    for index, path in enumerate(files):
        data = path.read_bytes()
        if cache is not None:
            keys[index] = cache.key(config.relative(path), data)
            found[index] = cache.get(config.relative(path), keys[index], _shown(path, config))
        if found[index] is None:
            pending.append((index, path, _decode(data)))
    for (index, path, _), findings in zip(
        pending, _lint_pending(pending, config, rules, jobs), strict=True
    ):
        found[index] = findings
        if cache is not None:
            cache.put(config.relative(path), keys[index], findings)
    if cache is not None:
        cache.save()
    return sorted(finding for findings in found if findings for finding in findings)


def _decode(data: bytes) -> str:
    """A source file's text as the parser wants it: UTF-8 (a byte-order mark dropped, bad bytes
    replaced) with universal newlines."""
    text = data.decode("utf-8-sig", errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def enabled_rules(config: LintConfig, codes: Iterable[str] = ()) -> list[Rule]:
    """The rules a run uses (``codes`` when given, else the enabled ones), ordered by code, each
    built with its ``[tool.oncely.lint.<CODE>]`` options.

    Raises `ConfigurationError` when a rule refuses its options.
    """
    only = set(codes)
    return [
        rule(config.options.get(rule.code))
        for rule in all_rules()
        if (rule.code in only if only else config.enabled(rule.code))
    ]


def _shown(path: Path, config: LintConfig) -> str:
    return config.relative(path) if path.is_absolute() else path.as_posix()


def _lint_pending(
    pending: Sequence[tuple[int, Path, str]],
    config: LintConfig,
    rules: list[Rule],
    jobs: int | None,
) -> list[list[Finding]]:
    workers = min(jobs or _usable_cores(), len(pending))
    if workers < 2 or len(pending) <= PARALLEL_MIN_FILES:
        return [lint_source(path, source, config, rules) for _, path, source in pending]
    # Several batches per worker even out files of very different sizes.
    size = -(-len(pending) // (workers * 4))
    batches = [
        [(path, source) for _, path, source in pending[start : start + size]]
        for start in range(0, len(pending), size)
    ]
    codes = [rule.code for rule in rules]
    with ProcessPoolExecutor(max_workers=workers, mp_context=_process_context()) as pool:
        results = pool.map(_lint_batch, repeat(config), repeat(codes), batches)
        return [findings for batch in results for findings in batch]


def _lint_batch(
    config: LintConfig, codes: list[str], batch: list[tuple[Path, str]]
) -> list[list[Finding]]:
    """One worker's share: rules are rebuilt here rather than pickled with their state."""
    rules = enabled_rules(config, codes)
    return [lint_source(path, source, config, rules) for path, source in batch]


def _usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _process_context() -> BaseContext:
    # A forked worker starts at once with oncely already imported; a spawned one re-imports it
    # (over half a second). Forking is only safe on Linux in a process with no other threads:
    # elsewhere a lock held by another thread, or macOS's frameworks, can hang the child.
    if sys.platform == "linux" and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def lint_source(
    path: Path, source: str, config: LintConfig, rules: list[Rule] | None = None
) -> list[Finding]:
    """Findings in one file's ``source``, reported under ``path``."""
    chosen = enabled_rules(config) if rules is None else rules
    shown = _shown(path, config)
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
