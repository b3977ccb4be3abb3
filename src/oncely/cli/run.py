"""`oncely run`: the worker, on every instance, any number of copies."""

from __future__ import annotations

import logging
from typing import Any

import click

from oncely.cli.loading import load_app
from oncely.errors import OncelyError
from oncely.worker import configure_logging, run_options, serve


@click.command(params=[click.Argument(["app_spec"], metavar="MODULE:APP"), *run_options()])
def run(app_spec: str, log_format: str, log_level: str, **worker: Any) -> None:
    """Run the app's jobs until SIGTERM or SIGINT, then drain and exit 0.

    Safe to start on every instance: each occurrence runs once however many workers run.
    """
    configure_logging("json" if log_format == "json" else "text", getattr(logging, log_level))
    app = load_app(app_spec)
    try:
        serve(app, **worker)
    except OncelyError as exc:
        raise click.ClickException(str(exc)) from exc
