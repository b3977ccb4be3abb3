"""The engine: materialise occurrences, claim them under leases, run them, book the outcome."""

from __future__ import annotations

from oncely.engine.describe import (
    OVERDUE_AFTER,
    ago,
    explain_cron,
    instance_document,
    is_overdue,
    iso_utc,
    json_value,
    occurrence_document,
    printable,
    schedule_document,
    schedule_state,
    summary,
    trigger_text,
    worker_seen_at,
    worker_words,
)
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
from oncely.engine.run import Run, idempotency_key
from oncely.engine.tick import Engine, TickReport, worker_id

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_LEASE",
    "DEFAULT_MISFIRE_LIMIT",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "OVERDUE_AFTER",
    "Delivery",
    "Engine",
    "Explanation",
    "Finished",
    "Job",
    "Misfire",
    "Run",
    "TickReport",
    "age",
    "ago",
    "calling",
    "claim_fields",
    "explain_cron",
    "extended",
    "idempotency_key",
    "instance_document",
    "is_overdue",
    "iso_utc",
    "json_value",
    "occurrence_document",
    "printable",
    "schedule_document",
    "schedule_state",
    "summary",
    "trigger_text",
    "worker_id",
    "worker_seen_at",
    "worker_words",
]
