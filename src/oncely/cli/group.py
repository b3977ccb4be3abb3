"""The `oncely` command group: every error is one line on stderr, and the exit codes are fixed."""

from __future__ import annotations

from collections.abc import Iterator
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
    """A click group whose usage errors, and its subcommands', are one line (exit status 2)."""

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
