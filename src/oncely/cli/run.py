"""`oncely run`: the worker, on every instance, any number of copies."""

from __future__ import annotations

import logging
import os
import sys
from datetime import timedelta
from typing import Any, NoReturn

import click

from oncely.app import App
from oncely.arguments import checked_retention
from oncely.cli.loading import load_app
from oncely.errors import ConfigurationError, OncelyError
from oncely.worker import DEFAULT_CONCURRENCY, DEFAULT_DRAIN_TIMEOUT_S, configure_logging


def _retention(ctx: click.Context, param: click.Parameter, value: str) -> timedelta:
    try:
        return checked_retention(value)
    except ConfigurationError:
        raise click.BadParameter(
            f"{value!r} is not a duration; use a whole number and m, h, d or w (30d, 12w)",
            ctx=ctx,
            param=param,
        ) from None


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=DEFAULT_CONCURRENCY,
    show_default=True,
    help="Handlers running at once in this process (sync ones on threads, async ones on one "
    "event loop).",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_DRAIN_TIMEOUT_S,
    show_default=True,
    help="Seconds SIGTERM/SIGINT waits for running handlers; a second signal exits at once.",
)
@click.option(
    "--http",
    metavar="HOST:PORT",
    help="Serve /healthz and /metrics there (off by default), e.g. 127.0.0.1:9464; or on the "
    "first free port of a range, for several workers on one host: 127.0.0.1:9464-9471.",
)
@click.option(
    "--retention",
    default="30d",
    show_default=True,
    callback=_retention,
    help="Housekeeping prunes history older than this (30d, 12w, ...).",
)
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
def run(app_spec: str, log_format: str, log_level: str, **worker: Any) -> None:
    """Run the app's jobs until SIGTERM or SIGINT, then drain and exit 0.

    Safe to start on every instance: each occurrence runs once however many workers run.
    """
    configure_logging("json" if log_format == "json" else "text", getattr(logging, log_level))
    app = load_app(app_spec)
    try:
        serve_worker(app, **worker)
    except OncelyError as exc:
        raise click.ClickException(str(exc)) from exc


def serve_worker(app: App, **worker: Any) -> NoReturn:
    """Run ``app``'s worker with `run`'s options other than logging's until SIGTERM or SIGINT,
    drain, and end the process with exit status 0.

    What ``oncely run`` and Django's ``manage.py oncely_run`` both do once they read their
    options. Raises `OncelyError` when the worker cannot start (an address in use, say).
    """
    try:
        app.run_worker(**worker)
    finally:
        app.close()
    # A handler still running after the drain timeout (its lease left to expire) must not keep
    # the process alive; everything worth keeping is booked or logged by now.
    logging.shutdown()
    sys.stdout.flush()
    os._exit(0)
