"""What `oncely lint` does once its options are read: findings printed, the exit status returned.

Free of click: ``oncely.cli.lint`` is the command's one definition (its options, help and
usage errors) and calls `run`; the console script calls `run` itself, with the defaults, when
the command line is ``oncely lint [PATH]...`` and nothing else (see ``oncely.cli``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from oncely.errors import ConfigurationError
from oncely.lint.cache import LintCache
from oncely.lint.config import LintConfig, load_config
from oncely.lint.engine import enabled_codes, lint_files
from oncely.lint.finding import Finding
from oncely.lint.reporters import text_report
from oncely.lint.rules import all_rules, rule_codes


def run(
    paths: tuple[Path, ...] = (),
    fmt: str = "text",
    select: str | None = None,
    ignore: str | None = None,
    list_rules: bool = False,
    prove_rules: bool = False,
    no_cache: bool = False,
) -> int:
    """Lint ``paths`` (default: the current directory) and print the findings in ``fmt``; or,
    with ``list_rules``, list the rules; or, with ``prove_rules``, prove them.

    Returns the exit status: 0 clean (or every rule proved), 1 findings (or a rule not proved).
    Raises `ConfigurationError` for a bad configuration or a bad combination of options.
    """
    if list_rules:
        for rule in all_rules():
            _echo(f"{rule.code} {rule.name}: {rule.message}")
        return 0
    if prove_rules and fmt != "text":
        raise ConfigurationError("--prove reports in text only; drop --format")
    targets = list(paths) or [Path.cwd()]
    if fmt == "sarif":
        # Absolute targets make every path relative to the config root, which SARIF's
        # %SRCROOT% names, wherever the command runs.
        targets = [target.resolve() for target in targets]
    config = _overridden(load_config(targets[0]), select, ignore)
    if prove_rules:
        return _prove(targets, config)
    cache = None if no_cache else LintCache(config, enabled_codes(config))
    findings = lint_files(targets, config, cache=cache)
    _print(findings, fmt, config)
    return 1 if findings else 0


def _prove(targets: list[Path], config: LintConfig) -> int:
    from oncely.lint.prove import prove

    proofs = prove(targets, config)
    for proof in proofs:
        _echo(str(proof))
    return 0 if all(proof.proved for proof in proofs) else 1


def _overridden(config: LintConfig, select: str | None, ignore: str | None) -> LintConfig:
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
    return LintConfig(
        root=config.root,
        select=chosen.get("select", config.select),
        ignore=chosen.get("ignore", config.ignore),
        exclude=config.exclude,
        allow=config.allow,
        options=config.options,
    )


def _print(findings: list[Finding], fmt: str, config: LintConfig) -> None:
    if fmt == "json":
        from oncely.lint.reporters import json_report

        _echo(json_report(findings))
        return
    if fmt == "sarif":
        from oncely.lint.reporters import sarif_report

        ran = [rule for rule in all_rules() if config.enabled(rule.code)]
        _echo(sarif_report(findings, ran, config.root))
        return
    _echo(text_report(findings), end="")
    if findings:
        _echo(f"{len(findings)} finding(s)", err=True)


def _echo(text: str, *, end: str = "\n", err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + end)
    stream.flush()
