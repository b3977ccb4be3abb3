"""`oncely lint`: findings as ``path:line:col: CODE message``; exit 1 on findings, 2 on bad use."""

from __future__ import annotations

import json
from pathlib import Path

import click

from oncely.errors import ConfigurationError
from oncely.lint import Finding, all_rules, lint_files, load_config
from oncely.lint.config import LintConfig


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--select", metavar="CODES", help="Comma-separated code prefixes to run only.")
@click.option("--ignore", metavar="CODES", help="Comma-separated code prefixes to skip.")
@click.option("--rules", "list_rules", is_flag=True, help="List the rules and exit.")
def lint(
    paths: tuple[Path, ...], fmt: str, select: str | None, ignore: str | None, list_rules: bool
) -> None:
    """Check PATHS (default: the current directory) against oncely's rules.

    Configured under [tool.oncely.lint] in the nearest pyproject.toml. Exit status: 0 clean,
    1 findings, 2 usage or configuration error.
    """
    if list_rules:
        for rule in all_rules():
            click.echo(f"{rule.code} {rule.name}: {rule.message}")
        return
    targets = list(paths) or [Path.cwd()]
    try:
        config = _overridden(load_config(targets[0]), select, ignore)
    except ConfigurationError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        findings = lint_files(targets, config)
    except ConfigurationError as exc:  # a rule refused its options
        raise click.UsageError(str(exc)) from exc
    _print(findings, fmt)
    if findings:
        raise SystemExit(1)


def _overridden(config: LintConfig, select: str | None, ignore: str | None) -> LintConfig:
    known = {rule.code for rule in all_rules()}
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


def _print(findings: list[Finding], fmt: str) -> None:
    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "path": f.path,
                        "line": f.line,
                        "col": f.col,
                        "code": f.code,
                        "message": f.message,
                    }
                    for f in findings
                ],
                indent=2,
            )
        )
        return
    for finding in findings:
        click.echo(str(finding))
    if findings:
        click.echo(f"{len(findings)} finding(s)", err=True)
