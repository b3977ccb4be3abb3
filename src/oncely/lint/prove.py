"""`oncely lint --prove`: each enabled rule, seen catching its own planted violation.

A lint nobody has seen fail is folklore (DESIGN lesson 13): a rule can be live in its tests and
dead in a project, excluded by a glob, allowed everywhere, or configured with options that match
nothing. So for every enabled rule, its ``violating`` example is planted as
``oncely_prove_<code>.py`` in a scratch directory that mirrors the config root, beside a file the
real run would lint, at a path that the configuration neither excludes nor allows for the rule,
and the rule alone runs on it under the project's configuration: its configured options, or its
``example_options`` when none are configured. The rule is proved when it fires at a line of the
plant. Each directory holding linted files is tried in turn, then the directories named, until
the rule fires.

Nothing is written in the project: the scratch directory is a temporary one, removed after.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from oncely.lint.config import LintConfig
from oncely.lint.engine import enabled_rules, lint_source, python_files
from oncely.lint.rules import Rule, all_rules


@dataclass(frozen=True)
class Proof:
    """Whether rule ``code`` fired on its plant: at ``path:line`` (config-relative) if so, and
    why not, in ``detail``, if not; ``detail`` also notes a proof made with example options."""

    code: str
    proved: bool
    path: str = ""
    line: int = 0
    detail: str = ""

    def __str__(self) -> str:
        if not self.proved:
            return f"{self.code} NOT PROVED: {self.detail}"
        note = f" ({self.detail})" if self.detail else ""
        return f"{self.code} proved: fired at {self.path}:{self.line}{note}"


def prove(paths: Iterable[Path], config: LintConfig) -> list[Proof]:
    """One `Proof` per rule enabled in ``config``, ordered by code, for a run over ``paths``.

    Raises `ConfigurationError` when a rule refuses its options (configured or example).
    """
    targets = list(paths)
    places = list(_places(targets, config))
    proofs = []
    with tempfile.TemporaryDirectory(prefix="oncely-prove-") as scratch:
        for rule in enabled_rules(config):
            proofs.append(_prove(type(rule), places, config, Path(scratch)))
    return proofs


def _places(targets: list[Path], config: LintConfig) -> Iterator[PurePosixPath]:
    """Config-relative directories where the run looks: those of its files, then those named;
    each once, and only those under the root (a mirror holds nothing else)."""
    seen: set[PurePosixPath] = set()
    folders = [path.parent for path in python_files(targets, config)]
    folders += [path if path.is_dir() else path.parent for path in targets]
    for folder in folders:
        relative = PurePosixPath(config.relative(folder))
        if relative.is_absolute() or relative in seen:
            continue
        seen.add(relative)
        yield relative


def _prove(
    rule_class: type[Rule], places: list[PurePosixPath], config: LintConfig, scratch: Path
) -> Proof:
    code = rule_class.code
    configured = config.options.get(code)
    options = configured or dict(rule_class.example_options)
    rule = rule_class(options)
    note = "with its example options; none are configured" if options and not configured else ""
    source = rule_class.violating
    lines = len(source.splitlines())
    plant = f"oncely_prove_{code.lower()}.py"
    companions = [
        companion(config.options.get(companion.code) or dict(companion.example_options))
        for companion in all_rules()
        if companion.code in rule_class.companions
    ]
    mirror = LintConfig(
        root=scratch,
        select=(code, *rule_class.companions),
        exclude=config.exclude,
        allow=config.allow,
        options={code: dict(options)},
    )
    tried: list[str] = []
    for place in places:
        relative = (place / plant).as_posix()
        if config.excluded(config.root / relative) or config.allowed(code, config.root / relative):
            continue
        tried.append(relative)
        path = scratch / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
        fired = sorted(
            finding.line
            for finding in lint_source(path, source, mirror, [rule, *companions])
            if finding.code == code and finding.path == relative and 1 <= finding.line <= lines
        )
        if fired:
            return Proof(code, True, relative, fired[0], note)
    if not tried:
        return Proof(
            code,
            False,
            detail="nowhere to plant it: every place the run looks is excluded or in the "
            f"rule's allow list ([tool.oncely.lint] exclude, allow.{code})",
        )
    where = tried[0] if len(tried) == 1 else f"{tried[0]} and {len(tried) - 1} other place(s)"
    options_used = ""
    if note:
        options_used = " with its example options"
    elif configured:
        options_used = " with the configured options"
    return Proof(
        code,
        False,
        tried[0],
        detail=f"cannot see its plant: planted at {where}, it did not fire{options_used}",
    )
