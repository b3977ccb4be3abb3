"""The `oncely` command group, `main`: every error is one line on stderr, and the exit codes
are fixed.

Subcommands are loaded when used: a run of ``oncely lint`` imports neither the engine nor the
stores, which the other commands' modules import.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

import click
from click.exceptions import NoArgsIsHelpError

EXIT_CODES = """\b
Exit status:
  0  success
  1  the operation failed: an oncely error, such as an unknown schedule key
     or a store that cannot be reached
  2  usage error: a bad MODULE:APP or a bad option value (e.g. an unreadable
     --since)"""


class OneLineUsageError(click.UsageError):
    """A usage error shown as one line that ends by pointing at the command's --help.

    click's own form (usage, hint, blank line, error) is four lines; scripts and logs keep one.
    """

    def show(self, file: IO[Any] | None = None) -> None:
        where = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        click.echo(f"Error: {self.format_message()}{where}", file=file, err=file is None)


@contextmanager
def _one_line_usage() -> Iterator[None]:
    try:
        yield
    except (NoArgsIsHelpError, OneLineUsageError):
        raise  # the first shows the help on purpose; the second is one line already
    except click.UsageError as exc:
        message = " ".join(exc.format_message().split())
        raise OneLineUsageError(message, ctx=exc.ctx) from exc


class CommandGroup(click.Group):
    """A click group whose usage errors, and its subcommands', are one line (exit status 2).

    ``lazy`` names subcommands by where they are defined, ``{"lint": "oncely.cli.lint:lint"}``;
    a module is imported when its command runs or help lists it.
    """

    def __init__(self, *args: Any, lazy: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, name = self.lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), name)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _one_line_usage():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _one_line_usage():
            return super().invoke(ctx)


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
    "web": "oncely.cli.web:web",
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
