"""The worker in the foreground of a process of its own: ``oncely run`` and Django's
``manage.py oncely_run``, two command lines over the same `options`, both ending in `serve`.

Here rather than in ``oncely.cli``, which nothing imports (DESIGN, Architecture): the Django
command took 3 of ``oncely run``'s 6 options while each declared its own.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import timedelta
from typing import Any, NoReturn, Protocol

import click

from oncely.arguments import Retention, checked_retention
from oncely.errors import ConfigurationError
from oncely.worker.loop import DEFAULT_CONCURRENCY, DEFAULT_DRAIN_TIMEOUT_S


class Serving(Protocol):
    """What `serve` runs: `oncely.App`."""

    def run_worker(
        self,
        *,
        concurrency: int = ...,
        drain_timeout: float = ...,
        http: str | None = ...,
        retention: timedelta | str = ...,
    ) -> None: ...

    def close(self) -> None: ...


def options() -> list[click.Option]:
    """The worker's options, each made anew (a click parameter belongs to one command)."""
    return [
        click.Option(
            ["--concurrency"],
            type=click.IntRange(min=1),
            default=DEFAULT_CONCURRENCY,
            show_default=True,
            help="Handlers running at once in this process (sync ones on threads, async ones on "
            "one event loop).",
        ),
        click.Option(
            ["--drain-timeout"],
            type=click.FloatRange(min=0),
            default=DEFAULT_DRAIN_TIMEOUT_S,
            show_default=True,
            help="Seconds SIGTERM/SIGINT waits for running handlers; a second signal exits at "
            "once.",
        ),
        click.Option(
            ["--http"],
            metavar="HOST:PORT",
            help="Serve /healthz and /metrics there (off by default), e.g. 127.0.0.1:9464; or on "
            "the first free port of a range, for several workers on one host: "
            "127.0.0.1:9464-9471.",
        ),
        click.Option(
            ["--retention"],
            default="30d",
            show_default=True,
            callback=_retention,
            help="Housekeeping prunes history older than this (30d, 12w, ...); statuses kept "
            "otherwise follow it as STATUS=DURATION: 30d,failed=90d,skipped=7d.",
        ),
        click.Option(
            ["--log-format"],
            type=click.Choice(["text", "json"]),
            default="text",
            show_default=True,
        ),
        click.Option(
            ["--log-level"],
            type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
            default="INFO",
            show_default=True,
        ),
    ]


def _retention(ctx: click.Context, param: click.Parameter, value: str) -> Retention:
    try:
        return checked_retention(value)
    except ConfigurationError:
        raise click.BadParameter(
            f"{value!r} is not a duration; use a whole number and m, h, d or w (30d, 12w), "
            "and for statuses kept otherwise STATUS=DURATION after it (30d,failed=90d)",
            ctx=ctx,
            param=param,
        ) from None


def serve(app: Serving, **worker: Any) -> NoReturn:
    """Run ``app``'s worker with the `options` other than logging's until SIGTERM or SIGINT,
    drain, and end the process with exit status 0.

    Raises `OncelyError` when the worker cannot start (an address in use, say).
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
