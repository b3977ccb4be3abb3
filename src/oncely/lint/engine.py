"""The lint engine: one parse and one walk per file, every enabled rule on that walk.

Suppressions are comments on the finding's line: ``# oncely: allow ONC101 -- reason``. One
without a reason still silences the finding but is itself a finding (ONC000): the exception is
written down or it is not an exception. So is one that names no code, or a code no rule has.
One that names a code of a rule that ran and did not fire on its line is stale (ONC002). A
suppressed finding is kept, with the suppression's reason, for the reports that show them
(SARIF); the others drop it. A file that Python could not read or parse is one finding (ONC001)
and the run goes on; one that only uses syntax newer than the running Python (and no newer than
the configured ``target-version``) is a note, which does not fail the run.

A run can keep findings in a `LintCache` (a file whose bytes and settings are unchanged is not
parsed again), and spreads the files it must parse over a process pool when there are more than
`PARALLEL_MIN_FILES` of them; either way the findings, and their order, are those of a serial run.
"""

from __future__ import annotations

import ast
import codecs
import gc
import io
import os
import re
import sys
import tokenize
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from oncely.lint.config import LintConfig
from oncely.lint.discovery import is_regular, nonblocking, python_files_under, read_regular
from oncely.lint.finding import NOTE, Finding
from oncely.lint.parallel import MAX_BATCHES, share
from oncely.lint.rules import Context, Rule, all_rules, rule_codes
from oncely.lint.rules.base import module_name

if TYPE_CHECKING:
    from oncely.lint.cache import LintCache

# A directive opens a comment, or follows a space inside one (after another tool's comment);
# the `#` of a URL's fragment does not.
SUPPRESSION = re.compile(r"(?:^|(?<=\s))#\s*oncely\s*:\s*allow(?![\w-])(?P<rest>.*)", re.I)
_CODE = re.compile(r"[\s,]*(?P<code>[a-z]+\d+)\b", re.I)
# An editor's smart dashes turn `--` into an en or em dash; the reason ends where another
# comment (`# type: ignore`) begins.
_REASON = re.compile(r"\s*(?:--|\u2013|\u2014)(?P<reason>.*?)(?:\s#(?:\s|$).*)?$")
_WORD = re.compile(r"[^\W_]")
# A run of characters an identifier may hold, one of them beyond ASCII. In code an identifier is
# bordered by ASCII (spaces, operators, quotes), so each one that is not plain ASCII is exactly
# one such run; elsewhere (strings, comments) a run is merely searched for nothing.
_NON_ASCII_WORD = re.compile(r"[0-9A-Za-z_]*[^\x00-\x7f][0-9A-Za-z_\x80-\U0010ffff]*")
_COOKIE = re.compile(rb"^(?:\xef\xbb\xbf)?[ \t\f]*#.*?coding[:=][ \t]*(?P<name>[-\w.]+)", re.M)
# Codes the engine itself reports (their rule files carry the documentation and examples).
SUPPRESSION_WITHOUT_REASON = "ONC000"
SYNTAX_ERROR = "ONC001"
UNUSED_SUPPRESSION = "ONC002"
ENGINE_CODES = (SUPPRESSION_WITHOUT_REASON, SYNTAX_ERROR, UNUSED_SUPPRESSION)
# Syntax a newer Python reads, by the version that reads it, found on the line where the running
# Python stopped: PEP 695 type parameters and aliases, PEP 758 unparenthesised except lists,
# PEP 750 template strings. PEP 701 f-strings are told by the error (`_newer_syntax`).
_NEWER_SYNTAX = (
    ((3, 12), re.compile(r"^\s*type\s+[^\W\d]\w*\s*[\[=]")),
    ((3, 12), re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+[^\W\d]\w*\s*\[")),
    ((3, 14), re.compile(r"^\s*except\s+[^\s(:][^:]*,[^:]*:")),
    ((3, 14), re.compile(r"(?<![\w.'\"])(?:[tT][rR]?|[rR][tT])['\"]")),
)
_F_STRING_START = re.compile(r"(?:[fF][rR]?|[rR][fF])['\"]")
#: Above this many files to parse, a run spreads them over a process pool; below it, starting
#: the workers costs more than it saves.
PARALLEL_MIN_FILES = 64

Handler = Callable[[ast.AST, Context], None]
#: Handlers by the node class they visit, each with the code of its rule.
Dispatch = dict[type[ast.AST], list[tuple[str, Handler]]]


@dataclass(frozen=True)
class _Suppression:
    codes: frozenset[str]
    reason: str
    line: int
    col: int


class _Unreadable(Exception):
    """Python could not read or parse the file: at ``line``, ``col`` (1-based, in bytes).
    ``needs`` is the newer Python whose syntax it stopped at, if that is what it stopped at."""

    def __init__(
        self, line: int, col: int, reason: str, needs: tuple[int, int] | None = None
    ) -> None:
        super().__init__(reason)
        self.line, self.col, self.needs = line, col, needs


@dataclass(frozen=True, slots=True)
class _Source:
    """A file to lint: its path as found (to read it), relative to the config root (for the
    cache and the allow lists) and as reported."""

    path: str
    relative: str
    shown: str


def python_files(paths: Iterable[Path], config: LintConfig) -> Iterator[Path]:
    """The ``.py`` files named or under the directories named, minus excluded ones, sorted."""
    return (Path(source.path) for source in _sources(paths, config))


def _sources(paths: Iterable[Path], config: LintConfig) -> Iterator[_Source]:
    """`python_files`, each with the paths a run needs, resolved once per directory."""
    resolver = _Resolver(config.root)
    for path in paths:
        if not path.is_dir():
            if not is_regular(str(path)):
                continue  # a FIFO or a device named on the command line: nothing to lint
            relative = resolver.relative(str(path))
            shown = relative if path.is_absolute() else path.as_posix()
            if not config.excludes(relative):
                yield _Source(str(path), relative, shown)
            continue
        top = path.as_posix()
        prefix = "" if top == "." else top.rstrip("/") + "/"
        base = resolver.relative(top)
        base = "" if base == "." else base.rstrip("/") + "/"
        for parts, symlink in python_files_under(top):
            below = "/".join(parts)
            file = prefix + below
            # A symlinked file is reported where it points, as Path.resolve() would have it.
            relative = resolver.relative(file) if symlink else base + below
            if not config.excludes(relative):
                yield _Source(file, relative, relative if path.is_absolute() else file)


class _Resolver:
    """``LintConfig.relative`` for many paths: each directory is resolved once, not each file."""

    def __init__(self, root: Path) -> None:
        self.root = root.as_posix()
        self._folders: dict[str, str] = {}

    def relative(self, path: str) -> str:
        folder, name = os.path.split(path)
        if name in ("", ".", "..") or os.path.islink(path):
            resolved = Path(path).resolve().as_posix()
        else:
            if folder not in self._folders:
                self._folders[folder] = Path(folder or ".").resolve().as_posix()
            resolved = f"{self._folders[folder].rstrip('/')}/{name}"
        if resolved == self.root:
            return "."
        inside = self.root.rstrip("/") + "/"
        return resolved[len(inside) :] if resolved.startswith(inside) else resolved


def lint_files(
    paths: Iterable[Path],
    config: LintConfig,
    codes: Iterable[str] = (),
    *,
    cache: LintCache | None = None,
    jobs: int | None = None,
    suppressed: bool = False,
) -> list[Finding]:
    """Findings of the enabled rules (or only ``codes``, when given) in ``paths``, sorted;
    with ``suppressed``, the suppressed ones too (each with its `Finding.justification`).

    With ``cache``, a file whose findings it holds is not parsed, and the findings of the files
    that were parsed are saved to it. ``jobs`` caps the processes that parse (default: the usable
    cores); with more than one and more than `PARALLEL_MIN_FILES` files to parse, the files are
    parsed by this process and a pool of ``jobs - 1`` more. Neither changes the findings nor
    their order.
    """
    sources = list(_sources(paths, config))
    found: list[list[Finding] | None] = [None] * len(sources)
    pending: list[tuple[int, _Source, bytes]] = []
    for index, source in enumerate(sources):
        if cache is None:
            with open(source.path, "rb", opener=nonblocking) as file:
                read = read_regular(file)
            if read is None:
                continue  # no longer a regular file
            data = read
        else:
            cached = cache.get(source.relative, source.path, source.shown)
            if not isinstance(cached, bytes):
                found[index] = cached
                continue
            data = cached
        pending.append((index, source, data))
    # Building the rules checks their options. A run that found every file in the cache skips
    # it, and importing them: a run under the same settings, options included, built them.
    rules = enabled_rules(config, codes) if pending or not sources else []
    for (index, source, _), findings in zip(
        pending, _lint_pending(pending, config, rules, jobs), strict=True
    ):
        found[index] = findings
        if cache is not None:
            cache.put(source.relative, findings)
    if cache is not None:
        cache.save()
    return sorted(
        finding
        for findings in found
        if findings
        for finding in findings
        if suppressed or finding.justification is None
    )


def _decode(data: bytes) -> str:
    """A source file's text as Python reads it: in the encoding a byte-order mark or a coding
    cookie gives, else UTF-8.

    Raises `_Unreadable` at the first byte that does not decode, or at a bad cookie.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        # An unknown encoding, a cookie against a byte-order mark, or bad bytes in the first two
        # lines: the cookie is the fault if there is one, else those bytes are.
        cookie = _COOKIE.search(data, 0, _line_end(data, _line_end(data, 0) + 1))
        if cookie is not None:
            reason = str(exc)
            if data.startswith(codecs.BOM_UTF8):
                name = cookie["name"].decode()
                reason = f"a UTF-8 byte-order mark, and a coding cookie for {name} (not utf-8)"
            raise _Unreadable(data.count(b"\n", 0, cookie.start()) + 1, 1, reason) from exc
        encoding = "utf-8-sig" if data.startswith(codecs.BOM_UTF8) else "utf-8"
    if encoding == "utf-8-sig":
        data, encoding = data[len(codecs.BOM_UTF8) :], "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        raise _Unreadable(
            data.count(b"\n", 0, exc.start) + 1,
            exc.start - start + 1,
            f"byte 0x{data[exc.start]:02x} is not {encoding}; save the file as UTF-8 or "
            "declare its encoding (PEP 263)",
        ) from exc
    return text


def _line_end(data: bytes, start: int) -> int:
    end = data.find(b"\n", start)
    return len(data) if end < 0 else end


def _parse(text: str, path: str) -> ast.Module:
    """``text``'s tree, whatever the warning filters; raises `_Unreadable` where Python would
    refuse the file."""
    if "\0" in text:
        # ast.parse raises ValueError here on some 3.11 releases, SyntaxError on others.
        at = text.index("\0")
        line = text.count("\n", 0, at) + 1
        before = text[text.rfind("\n", 0, at) + 1 : at]
        raise _Unreadable(line, len(before.encode()) + 1, "source code cannot contain null bytes")
    try:
        with warnings.catch_warnings():
            # Under -W error a SyntaxWarning (say, "\d" in a string) is raised as SyntaxError.
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=path)
    except SyntaxError as exc:
        line = exc.lineno or 1
        lines = text.split("\n")
        stopped = lines[line - 1] if line <= len(lines) else ""
        before = stopped[: max((exc.offset or 1) - 1, 0)]
        needs = _newer_syntax(exc.msg, stopped, len(before))
        raise _Unreadable(line, len(before.encode()) + 1, exc.msg, needs) from exc
    except (MemoryError, RecursionError) as exc:
        # CPython's parser gives up on very deep nesting with these rather than a SyntaxError.
        raise _Unreadable(1, 1, "too deeply nested for Python's parser") from exc


def _newer_syntax(message: str, line: str, offset: int) -> tuple[int, int] | None:
    """The newest Python, newer than this one, whose syntax is on ``line`` where the parser
    stopped with ``message`` (at ``offset``); None when the line holds none."""
    found = [version for version, pattern in _NEWER_SYNTAX if pattern.search(line)]
    # Before 3.12 an f-string could not nest its own quotes, a backslash, a comment or a line
    # break in its expressions: the tokenizer says "f-string: ..." or that the string ends.
    if message.startswith("f-string") or (
        message.startswith("unterminated") and _F_STRING_START.match(line, offset)
    ):
        found.append((3, 12))
    newer = [version for version in found if version > sys.version_info[:2]]
    return max(newer) if newer else None


def enabled_codes(config: LintConfig, codes: Iterable[str] = ()) -> list[str]:
    """The codes of the rules a run uses (``codes`` when given, else the enabled ones), ordered;
    the rules are not imported."""
    only = set(codes)
    return [code for code in rule_codes() if _runs(code, only, config)]


def enabled_rules(config: LintConfig, codes: Iterable[str] = ()) -> list[Rule]:
    """The rules of `enabled_codes`, ordered by code, each built with its
    ``[tool.oncely.lint.<CODE>]`` options.

    Raises `ConfigurationError` when a rule refuses its options.
    """
    only = set(codes)
    return [
        rule(config.options.get(rule.code))
        for rule in all_rules()
        if _runs(rule.code, only, config)
    ]


def _runs(code: str, only: set[str], config: LintConfig) -> bool:
    return code in only if only else config.enabled(code)


def _lint_pending(
    pending: Sequence[tuple[int, _Source, bytes]],
    config: LintConfig,
    rules: list[Rule],
    jobs: int | None,
) -> list[list[Finding]]:
    with _no_cycle_collection():
        return _lint_shared(pending, config, rules, jobs)


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused (forked children inherit the pause): parsing makes
    millions of objects, in no cycle, freed with their tree, and the collector's passes over
    them cost a tenth of a cold run. What cycles a rule leaves wait for the next pass."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _lint_shared(
    pending: Sequence[tuple[int, _Source, bytes]],
    config: LintConfig,
    rules: list[Rule],
    jobs: int | None,
) -> list[list[Finding]]:
    workers = min(jobs or _usable_cores(), len(pending))
    walk = _Walk.of(rules)
    if workers < 2 or len(pending) <= PARALLEL_MIN_FILES:
        return [_lint(source, data, config, walk) for _, source, data in pending]
    # Many small batches even out files of very different sizes, and the wait for the last.
    size = -(-len(pending) // min(workers * 8, MAX_BATCHES))
    batches = [
        [(source, data) for _, source, data in pending[start : start + size]]
        for start in range(0, len(pending), size)
    ]

    def here(batch: list[tuple[_Source, bytes]]) -> list[list[Finding]]:
        return [_lint(source, data, config, walk) for source, data in batch]

    pooled = partial(_lint_batch, config, [rule.code for rule in rules])
    return [findings for batch in share(batches, here, pooled, workers) for findings in batch]


def _lint_batch(
    config: LintConfig, codes: list[str], batch: list[tuple[_Source, bytes]]
) -> list[list[Finding]]:
    """A spawned worker's share: rules are rebuilt there rather than pickled with their state."""
    walk = _Walk.of(enabled_rules(config, codes))
    with _no_cycle_collection():
        return [_lint(source, data, config, walk) for source, data in batch]


def _usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def lint_source(
    path: Path, source: str | bytes, config: LintConfig, rules: list[Rule] | None = None
) -> list[Finding]:
    """Findings in one file's ``source`` (its text, or its bytes as Python reads them: a
    byte-order mark, a coding cookie), reported under ``path``.

    A file Python would refuse (bytes that do not decode, a null byte, a syntax error, nesting
    too deep for the parser) is one ONC001 finding and nothing else.
    """
    relative = config.relative(path)
    shown = relative if path.is_absolute() else path.as_posix()
    walk = _Walk.of(enabled_rules(config) if rules is None else rules)
    found = _lint(_Source(str(path), relative, shown), source, config, walk)
    return [finding for finding in found if finding.justification is None]


@dataclass(frozen=True)
class _Walk:
    """A run's rules as the walk meets them: ``visit_<NodeType>`` methods by node class, in the
    order of the rules (an inert one has none), and the `Rule.triggers` of the rules that have
    some."""

    dispatch: Dispatch
    triggers: dict[str, tuple[str, ...]]
    #: The codes of the rules that can fire (not inert): a suppression of another is not judged.
    codes: frozenset[str] = frozenset()

    @classmethod
    def of(cls, rules: Sequence[Rule]) -> _Walk:
        dispatch: Dispatch = {}
        for rule in rules:
            if rule.inert:
                continue
            for name in dir(rule):
                if not name.startswith("visit_"):
                    continue
                visited = getattr(ast, name[len("visit_") :], None)
                if isinstance(visited, type) and issubclass(visited, ast.AST):
                    dispatch.setdefault(visited, []).append((rule.code, getattr(rule, name)))
        return cls(
            dispatch,
            {rule.code: rule.triggers for rule in rules if rule.triggers},
            frozenset(rule.code for rule in rules if not rule.inert),
        )

    def for_file(self, source: _Source, text: str, config: LintConfig) -> Dispatch:
        """The handlers that see this file: not those of a rule allowed in it, nor of a rule
        whose triggers its text lacks."""
        skipped = {code for code in config.allow if config.allows(code, source.relative)}
        searched = _as_parsed(text)
        for code, triggers in self.triggers.items():
            if not any(trigger in searched for trigger in triggers):
                skipped.add(code)
        if not skipped:
            return self.dispatch
        kept = {
            kind: [(code, handle) for code, handle in handlers if code not in skipped]
            for kind, handlers in self.dispatch.items()
        }
        return {kind: handlers for kind, handlers in kept.items() if handlers}


def _as_parsed(text: str) -> str:
    """``text``, and after it each identifier that is not plain ASCII as the parser reads it:
    normalised (NFKC), so that ``sleep`` in full-width letters, or ``call_later`` with a
    full-width low line, is found as a trigger."""
    if text.isascii():
        return text
    import unicodedata  # only files beyond ASCII need it

    # Normalised text (accents in strings and comments, mostly) is normalised in each of its
    # identifiers too: ASCII borders them, and an identifier begins with a letter (a starter,
    # composing with nothing before it), so normalising one alone changes nothing either.
    if unicodedata.is_normalized("NFKC", text):
        return text
    words = _NON_ASCII_WORD.findall(text)
    return "\n".join([text, *(unicodedata.normalize("NFKC", word) for word in words)])


def _lint(source: _Source, content: str | bytes, config: LintConfig, walk: _Walk) -> list[Finding]:
    try:
        text = _decode(content) if isinstance(content, bytes) else content
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        tree = _parse(text, source.path)
    except _Unreadable as exc:
        if not config.enabled(SYNTAX_ERROR):
            return []
        return [_unreadable(source, exc, config)]
    findings: list[Finding] = []
    dispatch = walk.for_file(source, text, config)
    if dispatch:  # else no rule can fire here: the file was parsed (ONC001), not walked
        # Not splitlines(): it also breaks at a form feed, which Python reads as a space.
        context = Context(
            path=source.shown,
            module=module_name(source.shown),
            lines=text.split("\n"),
            root=config.root,
            tree=tree,
        )
        _visit(tree, dispatch, context)
        findings = context.findings
    # A suppression says "oncely" (in any case): a file that never does skips the tokenizer.
    suppressions = _suppressions(text) if "oncely" in text.lower() else {}
    if not findings and not suppressions:
        return findings
    return _apply_suppressions(findings, suppressions, source.shown, config, walk.codes)


def _unreadable(source: _Source, exc: _Unreadable, config: LintConfig) -> Finding:
    """The ONC001 finding of a file Python would refuse; a note when only the running Python
    is too old for it, and the project's target version is not."""
    where = (source.shown, exc.line, exc.col, SYNTAX_ERROR)
    if exc.needs is None:
        return Finding(*where, f"syntax error, file not checked: {exc}")
    needed = "{}.{}".format(*exc.needs)
    running = "{}.{}".format(*sys.version_info[:2])
    target = config.target_version
    if target is not None and target < exc.needs:
        return Finding(
            *where,
            f"syntax error, file not checked: Python {needed} syntax ({exc}), newer than "
            f"target-version py{target[0]}{target[1]}; rewrite it for Python "
            f"{target[0]}.{target[1]} or raise target-version in [tool.oncely.lint]",
        )
    return Finding(
        *where,
        f"file not checked: it needs Python {needed} ({exc}) and this is Python {running}; "
        f"run oncely lint under Python {needed} or newer to check it",
        level=NOTE,
    )


def _visit(tree: ast.AST, dispatch: Dispatch, context: Context) -> None:
    """Every node of ``tree`` once, breadth first as ``ast.walk``, to the handlers of its class."""
    nodes = [tree]
    handlers_of, append, extend, node_class = dispatch.get, nodes.append, nodes.extend, ast.AST
    for node in nodes:  # the list grows behind the loop: a queue without popping
        handlers = handlers_of(node.__class__)
        if handlers:
            for _, handle in handlers:
                handle(node, context)
        for name in node._fields:  # oncely: allow ONC201 -- ast's public _fields, not oncely's
            value = getattr(node, name, None)
            if value.__class__ is list:
                extend([item for item in value if isinstance(item, node_class)])
            elif isinstance(value, node_class):
                append(value)


def _suppressions(source: str) -> dict[int, _Suppression]:
    found: dict[int, _Suppression] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.COMMENT:
                continue
            match = SUPPRESSION.search(token.string)
            if match is None:
                continue
            codes, reason = _directive(match["rest"])
            line, col = token.start
            before = token.line[: col + match.start()]
            found[line] = _Suppression(codes, reason, line, len(before.encode()) + 1)
    except (tokenize.TokenError, SyntaxError):
        pass  # the file parsed; a tokenizer quirk only costs its suppressions
    return found


def _directive(rest: str) -> tuple[frozenset[str], str]:
    """The codes and reason of what follows ``# oncely: allow``; a reason with no letter or
    digit in it (``-- ...``) is none."""
    codes: set[str] = set()
    at = 0
    while (code := _CODE.match(rest, at)) is not None:
        codes.add(code["code"].upper())
        at = code.end()
    reason = _REASON.match(rest, at)
    text = reason["reason"].strip() if reason else ""
    return frozenset(codes), text if _WORD.search(text) else ""


def _apply_suppressions(
    findings: list[Finding],
    suppressions: dict[int, _Suppression],
    shown: str,
    config: LintConfig,
    ran: frozenset[str],
) -> list[Finding]:
    """``findings``, those a suppression silences marked with its reason; and the findings of
    the suppressions themselves (ONC000, ONC002)."""
    kept: list[Finding] = []
    used: dict[int, set[str]] = {}
    for finding in findings:
        suppression = suppressions.get(finding.line)
        if suppression is None or finding.code not in suppression.codes:
            kept.append(finding)
        else:
            used.setdefault(finding.line, set()).add(finding.code)
            kept.append(replace(finding, justification=suppression.reason))
    known = {rule.code for rule in all_rules()}
    for suppression in suppressions.values():
        problem = _problem(suppression, known)
        if problem and config.enabled(SUPPRESSION_WITHOUT_REASON):
            kept.append(
                Finding(
                    shown, suppression.line, suppression.col, SUPPRESSION_WITHOUT_REASON, problem
                )
            )
            continue
        stale = sorted((suppression.codes & ran) - used.get(suppression.line, set()))
        if stale and not problem and config.enabled(UNUSED_SUPPRESSION):
            codes = ", ".join(stale)
            kept.append(
                Finding(
                    shown,
                    suppression.line,
                    suppression.col,
                    UNUSED_SUPPRESSION,
                    f"unused suppression: {codes} did not fire on this line; remove "
                    f"{'it' if len(stale) == 1 else 'them'} from the comment (or the comment)",
                )
            )
    return kept


def _problem(suppression: _Suppression, known: set[str]) -> str:
    """What is wrong with ``suppression`` ('' when nothing is), one fault at a time."""
    if not suppression.codes:
        return (
            "suppression names no rule code; write "
            "'# oncely: allow CODE -- why this is the one exception'"
        )
    unknown = sorted(suppression.codes - known)
    if unknown:
        return (
            f"suppression of unknown code {', '.join(unknown)}; "
            "'oncely lint --rules' lists the codes"
        )
    if not suppression.reason:
        codes = ", ".join(sorted(suppression.codes))
        return (
            f"suppression of {codes} without a reason; write "
            f"'# oncely: allow {codes} -- why this is the one exception'"
        )
    return ""
