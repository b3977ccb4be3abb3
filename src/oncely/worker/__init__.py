"""The worker process: wake-up, concurrency, heartbeats, shutdown, housekeeping, health."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncely.worker.embedded import Embedded
from oncely.worker.logs import configure_logging
from oncely.worker.loop import DEFAULT_CONCURRENCY, DEFAULT_DRAIN_TIMEOUT_S, Worker
from oncely.worker.parts import Assembles, Parts
from oncely.worker.server import parse_address

if TYPE_CHECKING:
    from oncely.worker.foreground import options as run_options
    from oncely.worker.foreground import serve


def __getattr__(name: str) -> object:
    # Imported on first use: click is the command lines' (oncely run, manage.py oncely_run), and
    # an app that only schedules never needs it.
    if name in ("run_options", "serve"):
        from oncely.worker import foreground

        return foreground.options if name == "run_options" else foreground.serve
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_DRAIN_TIMEOUT_S",
    "Assembles",
    "Embedded",
    "Parts",
    "Worker",
    "configure_logging",
    "parse_address",
    "run_options",
    "serve",
]
