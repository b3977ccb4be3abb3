"""`oncely lint`: findings as ``path:line:col: CODE message``; exit 1 on findings, 2 on bad use.

``--prove`` instead plants each enabled rule's violating example in a scratch mirror of the
project and reports whether the rule fired on it; exit 1 when any rule did not.
"""

from __future__ import annotations

from pathlib import Path

import click

from oncely.errors import ConfigurationError
from oncely.lint import Finding, all_rules, load_config
from oncely.lint.cache import LintCache
from oncely.lint.config import LintConfig
from oncely.lint.engine import enabled_codes, lint_files
from oncely.lint.reporters import text_report
from oncely.lint.rules import rule_codes


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text")
@click.option("--select", metavar="CODES", help="Comma-separated code prefixes to run only.")
@click.option("--ignore", metavar="CODES", help="Comma-separated code prefixes to skip.")
@click.option("--rules", "list_rules", is_flag=True, help="List the rules and exit.")
@click.option(
    "--prove",
    "prove_rules",
    is_flag=True,
    help="Plant each enabled rule's violating example in a scratch copy and show it firing.",
)
@click.option(
    "--no-cache", is_flag=True, help="Parse every file; neither read nor write .oncely_cache/."
)
def lint(
    paths: tuple[Path, ...],
    fmt: str,
    select: str | None,
    ignore: str | None,
    list_rules: bool,
    prove_rules: bool,
    no_cache: bool,
) -> None:
    """Check PATHS (default: the current directory) against oncely's rules.

    Configured under [tool.oncely.lint] in the nearest pyproject.toml. Findings are cached by
    file content under .oncely_cache/lint/ beside it. Exit status: 0 clean (or every rule
    proved), 1 findings (or a rule not proved), 2 usage or configuration error.
    """
    if list_rules:
        for rule in all_rules():
            click.echo(f"{rule.code} {rule.name}: {rule.message}")
        return
    if prove_rules and fmt != "text":
        raise click.UsageError("--prove reports in text only; drop --format")
    targets = list(paths) or [Path.cwd()]
    if fmt == "sarif":
        # Absolute targets make every path relative to the config root, which SARIF's
        # %SRCROOT% names, wherever the command runs.
        targets = [target.resolve() for target in targets]
    try:
        config = _overridden(load_config(targets[0]), select, ignore)
        if prove_rules:
            _prove(targets, config)
            return
        cache = None if no_cache else LintCache(config, enabled_codes(config))
        findings = lint_files(targets, config, cache=cache)
    except ConfigurationError as exc:  # a bad table, or a rule refusing its options
        raise click.UsageError(str(exc)) from exc
    _print(findings, fmt, config)
    if findings:
        raise SystemExit(1)


def _prove(targets: list[Path], config: LintConfig) -> None:
    from oncely.lint.prove import prove

    proofs = prove(targets, config)
    for proof in proofs:
        click.echo(str(proof))
    if not all(proof.proved for proof in proofs):
        raise SystemExit(1)


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

        click.echo(json_report(findings))
        return
    if fmt == "sarif":
        from oncely.lint.reporters import sarif_report

        ran = [rule for rule in all_rules() if config.enabled(rule.code)]
        click.echo(sarif_report(findings, ran, config.root))
        return
    click.echo(text_report(findings), nl=False)
    if findings:
        click.echo(f"{len(findings)} finding(s)", err=True)
