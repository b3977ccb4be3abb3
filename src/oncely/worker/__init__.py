"""The worker process: wake-up, concurrency, heartbeats, shutdown, housekeeping, health."""

from __future__ import annotations

from oncely.worker.logs import configure_logging
from oncely.worker.loop import DEFAULT_CONCURRENCY, DEFAULT_DRAIN_TIMEOUT_S, Worker

__all__ = ["DEFAULT_CONCURRENCY", "DEFAULT_DRAIN_TIMEOUT_S", "Worker", "configure_logging"]
