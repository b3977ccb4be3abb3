"""The `oncely` command."""

from __future__ import annotations

import click

from oncely.cli.migrate import migrate
from oncely.cli.preview import preview


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="oncely")
def main() -> None:
    """oncely: every scheduled job once per occurrence, however many copies are running."""


main.add_command(migrate)
main.add_command(preview)

__all__ = ["main"]
