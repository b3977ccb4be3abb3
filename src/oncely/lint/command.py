"""What `oncely lint` does once its options are read: findings printed, the exit status returned.

Free of click: ``oncely.cli.lint`` is the command's one definition (its options, help and
usage errors) and calls `run`; the console script calls `run` itself, with the defaults, when
the command line is ``oncely lint [PATH]...`` and nothing else (see ``oncely.cli``).

A run first tries its manifest (``oncely.lint.manifest``), which answers a run where nothing
changed without importing the engine or the rules: so they are imported here on first use.
"""

from __future__ import annotations

import os
import sys

from oncely.errors import ConfigurationError
from oncely.lint.manifest import RunManifest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from oncely.lint.config import LintConfig
    from oncely.lint.finding import Finding


def run(
    paths: Sequence[str | os.PathLike[str]] = (),
    fmt: str = "text",
    select: str | None = None,
    ignore: str | None = None,
    list_rules: bool = False,
    prove_rules: bool = False,
    no_cache: bool = False,
    explain: str | None = None,
) -> int:
    """Lint ``paths`` (default: the current directory) and print the findings in ``fmt``; or,
    with ``list_rules``, list the rules; with ``explain``, print that rule's documentation;
    or, with ``prove_rules``, prove them.

    Returns the exit status: 0 clean (or every rule proved), 1 findings (or a rule not proved).
    Raises `ConfigurationError` for a bad configuration or a bad combination of options.
    """
    if explain is not None:
        from oncely.lint.reporters import rule_page
        from oncely.lint.rules import all_rules

        found = [rule for rule in all_rules() if rule.code == explain.strip().upper()]
        if not found:
            raise ConfigurationError(f"--explain {explain}: no rule has that code; see --rules")
        _echo(rule_page(found[0]), end="")
        return 0
    if list_rules:
        from oncely.lint.rules import all_rules

        for rule in all_rules():
            _echo(f"{rule.code} {rule.name}: {rule.message}")
        return 0
    if prove_rules and fmt != "text":
        raise ConfigurationError("--prove reports in text only; drop --format")
    manifest = None
    if not (prove_rules or no_cache):
        manifest = RunManifest([os.fspath(path) for path in paths], fmt, select, ignore)
        status = manifest.replay()
        if status is not None:
            return status
        manifest.start()
    from pathlib import Path

    from oncely.lint.config import load_config
    from oncely.lint.engine import enabled_codes, lint_files

    targets = [Path(path) for path in paths] or [Path.cwd()]
    if fmt == "sarif":
        # Absolute targets make every path relative to the config root, which SARIF's
        # %SRCROOT% names, wherever the command runs.
        targets = [target.resolve() for target in targets]
    config = _overridden(load_config(targets[0]), select, ignore)
    if prove_rules:
        return _prove(targets, config)
    cache = None
    if not no_cache:
        from oncely.lint.cache import LintCache  # and hashlib: a --no-cache run needs neither

        cache = LintCache(config, enabled_codes(config))
    findings = lint_files(targets, config, cache=cache, suppressed=fmt == "sarif")
    out, err = _report(findings, fmt, config)
    _echo(out, end="")
    if err:
        _echo(err, end="", err=True)
    # Suppressed findings (in SARIF) and notes (a file this Python is too old to parse) are
    # shown and do not fail the run.
    status = 1 if any(f.justification is None and f.level == "error" for f in findings) else 0
    if manifest is not None:
        manifest.record(out, err, status)
    return status


def _prove(targets: list[Path], config: LintConfig) -> int:
    from oncely.lint.prove import prove

    proofs = prove(targets, config)
    for proof in proofs:
        _echo(str(proof))
    return 0 if all(proof.proved for proof in proofs) else 1


def _overridden(config: LintConfig, select: str | None, ignore: str | None) -> LintConfig:
    from oncely.lint.rules import rule_codes

    known = set(rule_codes())
    chosen: dict[str, tuple[str, ...]] = {}
    for option, value in (("select", select), ("ignore", ignore)):
        if value is None:
            continue
        codes = tuple(code.strip().upper() for code in value.split(",") if code.strip())
        unknown = [c for c in codes if not any(k.startswith(c) for k in known)]
        if unknown:
            raise ConfigurationError(
                f"--{option} {unknown[0]}: no rule has that code; see 'oncely lint --rules'"
            )
        chosen[option] = codes
    from dataclasses import replace

    return replace(
        config,
        select=chosen.get("select", config.select),
        ignore=chosen.get("ignore", config.ignore),
    )


def _report(findings: list[Finding], fmt: str, config: LintConfig) -> tuple[str, str]:
    """What the run writes to standard output and to standard error."""
    if fmt == "json":
        from oncely.lint.reporters import json_report

        return json_report(findings) + "\n", ""
    if fmt == "sarif":
        from oncely.lint.reporters import sarif_report
        from oncely.lint.rules import all_rules

        ran = [rule for rule in all_rules() if config.enabled(rule.code)]
        return sarif_report(findings, ran, config.root, config.docs_url) + "\n", ""
    from oncely.lint.reporters import summary, text_report

    return text_report(findings, config.docs_url), summary(findings)


def _echo(text: str, *, end: str = "\n", err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + end)
    stream.flush()
