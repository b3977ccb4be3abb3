"""Code-declared schedules, brought in line with the code that runs (DESIGN: reconciliation).

Each job declared with a trigger has the schedule keyed by its name. A changed trigger replaces
the future from now, with no replay of the past; an unchanged one keeps its next run, so starting
more instances changes nothing. A code-declared schedule whose job is gone from the code stops
firing (status ``removed``) and keeps its history.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from oncely.engine.job import Job
from oncely.store import Store

log = logging.getLogger("oncely")


def reconcile(store: Store, jobs: Mapping[str, Job], now: datetime) -> None:
    declared = {name: job for name, job in jobs.items() if job.trigger is not None}
    for name, job in declared.items():
        assert job.trigger is not None
        first = job.trigger.next_after(now)
        store.save_schedule(
            tenant=None,
            key=name,
            job=name,
            origin="code",
            trigger=job.trigger,
            payload=None,
            next_run_at=first,
            now=now,
        )
    for key in store.code_schedule_keys():
        if key not in declared:
            store.remove_schedule(None, key, now)
            log.warning(
                "oncely: job %r is no longer declared in code; its schedule stops firing and "
                "its history stays",
                key,
            )
