"""The engine: materialise occurrences, claim them under leases, run them, book the outcome."""

from __future__ import annotations

from oncely.engine.explain import Explanation
from oncely.engine.job import (
    DEFAULT_GRACE,
    DEFAULT_LEASE,
    DEFAULT_MISFIRE_LIMIT,
    DEFAULT_RETRIES,
    Delivery,
    Job,
    Misfire,
)
from oncely.engine.run import Run
from oncely.engine.tick import Engine, TickReport, worker_id

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_LEASE",
    "DEFAULT_MISFIRE_LIMIT",
    "DEFAULT_RETRIES",
    "Delivery",
    "Engine",
    "Explanation",
    "Job",
    "Misfire",
    "Run",
    "TickReport",
    "worker_id",
]
