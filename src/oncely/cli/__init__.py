"""The `oncely` command."""

from __future__ import annotations

import click

from oncely.cli.backfill import backfill
from oncely.cli.control import pause, resume, trigger
from oncely.cli.explain import explain
from oncely.cli.group import EXIT_CODES, CommandGroup
from oncely.cli.history import history
from oncely.cli.jobs import jobs
from oncely.cli.lint import lint
from oncely.cli.migrate import migrate
from oncely.cli.preview import preview
from oncely.cli.run import run


@click.group(
    cls=CommandGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_CODES,
)
@click.version_option(package_name="oncely")
def main() -> None:
    """oncely: every scheduled job once per occurrence, however many copies are running.

    MODULE:APP names your app: the module to import (from the current directory too) and the
    oncely.App in it, e.g. myservice.tasks:app.
    """


for command in (
    run,
    jobs,
    history,
    trigger,
    pause,
    resume,
    explain,
    backfill,
    preview,
    migrate,
    lint,
):
    main.add_command(command)

__all__ = ["main"]
