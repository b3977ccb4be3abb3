"""``manage.py oncely_run``: `oncely run` for the app ``settings.ONCELY_APP`` names.

Its options are ``oncely run``'s (`oncely.worker.run_options`): the same names, defaults, checks
and help, and an option added to ``oncely run`` is one of these too.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

import click
from django.core.management.base import BaseCommand, CommandError

from oncely.errors import OncelyError
from oncely.integrations.django.apps import scheduler
from oncely.worker import configure_logging, run_options, serve

_LOGGING = ("log_format", "log_level")
_OPTIONS = run_options()
# A context for click's conversions and checks of the options, as `oncely run` has.
_COMMAND = click.Command("oncely_run", params=[*_OPTIONS])


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no type information
    help = (
        "Run oncely's worker loop in this process until SIGTERM or SIGINT, then drain: any "
        "number of copies, anywhere. The options are `oncely run`'s."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        context = click.Context(_COMMAND)
        for option in _OPTIONS:
            parser.add_argument(
                *option.opts,
                dest=option.name,
                # Absent from the options when not given, so that handle() knows what was.
                default=argparse.SUPPRESS,
                help=_help(option),
                **_reading(context, option),
            )

    def handle(self, *args: Any, **options: Any) -> None:
        context = click.Context(_COMMAND)
        chosen = {
            option.name: options[option.name]
            if option.name in options
            else option.process_value(context, option.get_default(context))
            for option in _OPTIONS
            if option.name is not None
        }
        log_format, log_level = (chosen.pop(name) for name in _LOGGING)
        # Django's LOGGING may have set up the root logger already: oncely's handler beside it
        # would print every line twice, unless the command line asked for oncely's format.
        if any(name in options for name in _LOGGING) or not logging.getLogger().handlers:
            configure_logging(
                "json" if log_format == "json" else "text", getattr(logging, log_level)
            )
        try:
            serve(scheduler(), **chosen)
        except OncelyError as exc:
            raise CommandError(str(exc)) from exc


def _reading(context: click.Context, option: click.Option) -> dict[str, Any]:
    if option.is_flag:
        return {"action": "store_const", "const": option.flag_value}

    def read(text: str) -> Any:
        try:
            return option.process_value(context, text)
        except click.BadParameter as exc:
            raise argparse.ArgumentTypeError(exc.message) from exc

    return {"type": read, "metavar": option.make_metavar(context)}


def _help(option: click.Option) -> str:
    text = option.help or ""
    if option.show_default and option.default is not None:
        text = f"{text} (default: {option.default})"
    return text.replace("%", "%%")  # argparse formats help with %
