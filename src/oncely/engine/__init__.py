"""The engine: materialise occurrences, claim them under leases, run them, book the outcome."""

from __future__ import annotations

from oncely.engine.execute import Finished, calling, claim_fields, extended
from oncely.engine.explain import Explanation
from oncely.engine.job import (
    DEFAULT_GRACE,
    DEFAULT_LEASE,
    DEFAULT_MISFIRE_LIMIT,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    Delivery,
    Job,
    Misfire,
)
from oncely.engine.misfire import age
from oncely.engine.run import Run
from oncely.engine.tick import Engine, TickReport, worker_id

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_LEASE",
    "DEFAULT_MISFIRE_LIMIT",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "Delivery",
    "Engine",
    "Explanation",
    "Finished",
    "Job",
    "Misfire",
    "Run",
    "TickReport",
    "age",
    "calling",
    "claim_fields",
    "extended",
    "worker_id",
]
