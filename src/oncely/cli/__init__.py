"""The `oncely` command."""

from __future__ import annotations

import click

from oncely.cli.group import EXIT_CODES, CommandGroup

_COMMANDS = {
    "run": "oncely.cli.run:run",
    "jobs": "oncely.cli.jobs:jobs",
    "history": "oncely.cli.history:history",
    "trigger": "oncely.cli.control:trigger",
    "pause": "oncely.cli.control:pause",
    "resume": "oncely.cli.control:resume",
    "explain": "oncely.cli.explain:explain",
    "backfill": "oncely.cli.backfill:backfill",
    "preview": "oncely.cli.preview:preview",
    "migrate": "oncely.cli.migrate:migrate",
    "lint": "oncely.cli.lint:lint",
}


@click.group(
    cls=CommandGroup,
    lazy=_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_CODES,
)
@click.version_option(package_name="oncely")
def main() -> None:
    """oncely: every scheduled job once per occurrence, however many copies are running.

    MODULE:APP names your app: the module to import (from the current directory too) and the
    oncely.App in it, e.g. myservice.tasks:app.
    """


__all__ = ["main"]
