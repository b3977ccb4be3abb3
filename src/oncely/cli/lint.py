"""`oncely lint`: findings as ``path:line:col: CODE message``; exit 1 on findings, 2 on bad use.

``--prove`` instead plants each enabled rule's violating example in a scratch mirror of the
project and reports whether the rule fired on it; exit 1 when any rule did not. This is the
command's one definition; what it does is ``oncely.lint.command.run``.
"""

from __future__ import annotations

from pathlib import Path

import click

from oncely.errors import ConfigurationError
from oncely.lint import command


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text")
@click.option("--select", metavar="CODES", help="Comma-separated code prefixes to run only.")
@click.option("--ignore", metavar="CODES", help="Comma-separated code prefixes to skip.")
@click.option("--rules", "list_rules", is_flag=True, help="List the rules and exit.")
@click.option("--explain", metavar="CODE", help="Print the documentation of rule CODE and exit.")
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
    explain: str | None,
) -> None:
    """Check PATHS (default: the current directory) against oncely's rules.

    Configured under [tool.oncely.lint] in the nearest pyproject.toml. Findings are cached by
    file content under .oncely_cache/lint/ beside it. Exit status: 0 clean (or every rule
    proved), 1 findings (or a rule not proved), 2 usage or configuration error.
    """
    try:
        status = command.run(
            paths,
            fmt=fmt,
            select=select,
            ignore=ignore,
            list_rules=list_rules,
            prove_rules=prove_rules,
            no_cache=no_cache,
            explain=explain,
        )
    except ConfigurationError as exc:  # a bad table, a rule refusing its options, bad options
        raise click.UsageError(str(exc)) from exc
    if status:
        raise SystemExit(status)
