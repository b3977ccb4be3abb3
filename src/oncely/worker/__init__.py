"""The worker process: wake-up, concurrency, heartbeats, shutdown, housekeeping, health."""

from __future__ import annotations

from oncely.worker.embedded import Embedded
from oncely.worker.logs import configure_logging
from oncely.worker.loop import DEFAULT_CONCURRENCY, DEFAULT_DRAIN_TIMEOUT_S, Worker
from oncely.worker.parts import Assembles, Parts
from oncely.worker.server import parse_address

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_DRAIN_TIMEOUT_S",
    "Assembles",
    "Embedded",
    "Parts",
    "Worker",
    "configure_logging",
    "parse_address",
]
