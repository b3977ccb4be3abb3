"""What each page shows, as JSON-ready documents: the HTML page and its ``/api`` twin render the
same document, and the documents are the CLI's (`oncely.engine.describe`), so the dashboard, the
API and `oncely jobs`/`explain`/`history` never disagree."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any, cast, get_args

from oncely.app import DEFAULT_PAGE, App
from oncely.clock import RESYNC_S
from oncely.engine import (
    idempotency_key,
    instance_document,
    is_overdue,
    occurrence_document,
    schedule_document,
    schedule_state,
    summary,
    worker_seen_at,
)
from oncely.errors import InvalidSchedule, UnknownSchedule
from oncely.model import Occurrence, OccurrenceStatus, ScheduleStatus

STATES = ("active", "ended", "invalid")
STATUSES: tuple[str, ...] = get_args(OccurrenceStatus)
#: An occurrence that started this long after its time is shown as late.
LATE_AFTER = timedelta(minutes=1)
#: A worker writes its heartbeat about once a minute: one silent for three is not live.
LIVE_WITHIN = timedelta(seconds=3 * RESYNC_S)
_PAGE_LIMIT = 500
_BACKFILL_PREVIEW = 1000


def overview(app: App) -> dict[str, Any]:
    """The front page: workers, the latest occurrences, the latest failures, held locks."""
    now = app.now()
    versions = app.store.code_versions(5)
    leases = app.store.leases(100)
    return {
        "now": now,
        "worker_seen_at": worker_seen_at(versions),
        "running": [_row(o, now) for o in app.store.running(20)],
        "latest": [_row(o, now) for o in app.history(limit=20)],
        "failures": [_row(o, now) for o in app.history(status="failed", limit=10)],
        "locks_held": sum(lease.expires_at > now for lease in leases),
        "drift": sum(map(len, drift(app).values())),
    }


def schedules(
    app: App,
    *,
    job: str | None,
    state: str | None,
    tenant: str | None,
    prefix: str | None,
    after: tuple[str | None, str] | None,
    limit: int = DEFAULT_PAGE,
) -> dict[str, Any]:
    """One page of schedules by (tenant, key) after ``after``, filtered; ``next`` names the
    page after it (None on the last page). Raises `InvalidSchedule` for a filter out of range."""
    if state is not None and state not in STATES:
        raise InvalidSchedule(f"state {state!r} is not one of {', '.join(STATES)}")
    if not 1 <= limit <= _PAGE_LIMIT:
        raise InvalidSchedule(f"limit {limit} is not between 1 and {_PAGE_LIMIT}")
    now = app.now()
    page = app.schedules(
        tenant,
        job=job or None,
        status=cast(ScheduleStatus | None, state),
        key_prefix=prefix or None,
        after=after,
        limit=limit,
    )
    documents = []
    for s in page:
        document = schedule_document(s, now)
        document["state"] = schedule_state(s, now)
        documents.append(document)
    last = page[-1] if len(page) == limit else None
    return {
        "now": now,
        "filters": {"job": job, "state": state, "tenant": tenant, "prefix": prefix},
        "schedules": documents,
        "next": None if last is None else {"after": last.key, "after_tenant": last.tenant},
    }


def schedule(app: App, tenant: str | None, key: str, *, recent: int = 60) -> dict[str, Any]:
    """One schedule: the explain panel, upcoming occurrences with DST notes, a timeline of its
    recent occurrences (oldest first), its history and the actions people took on it.
    Raises `UnknownSchedule`."""
    source = app if tenant is None else app.for_tenant(tenant)
    explained = source.explain(key, upcoming=10, recent=recent)
    now = explained.now
    document = explained.document()
    document["state_word"] = schedule_state(explained.schedule, now)
    document["explain"] = str(explained)
    document["timeline"] = [_cell(o, now) for o in reversed(explained.recent)]
    document["history"] = [_row(o, now) for o in explained.recent]
    document["actions"] = [asdict(a) for a in app.store.actions(tenant, key, 20)]
    document["overdue"] = is_overdue(explained.schedule, now)
    return document


def occurrence(app: App, tenant: str | None, key: str, at: datetime) -> dict[str, Any]:
    """One occurrence: every field, each attempt (its worker, fence, outcome and whole error),
    the last error, its lease, its idempotency key. Raises `UnknownSchedule` when the schedule
    or the occurrence does not exist."""
    source = app if tenant is None else app.for_tenant(tenant)
    found = source.history(key, since=at, until=at + timedelta(microseconds=1), limit=1)
    if not found:
        source.explain(key, upcoming=0, recent=0)  # an unknown key says so
        raise UnknownSchedule(f"schedule {key!r} has no occurrence at {at.isoformat()}")
    o = found[0]
    now = app.now()
    attempts = app.attempts(o.key, o.scheduled_for, tenant=o.tenant)
    return {
        **_row(o, now),
        "idempotency_key": idempotency_key(o.tenant, o.key, o.scheduled_for),
        "attempt_details": [asdict(a) for a in attempts],
        # Booked before oncely kept each attempt, or past the most it keeps.
        "attempts_not_kept": max(o.attempts - len(attempts), 0),
        "actions": [
            asdict(a)
            for a in app.store.actions(tenant, key, 50)
            if a.detail is not None and o.scheduled_for.isoformat() in a.detail
        ],
    }


def workers(app: App) -> dict[str, Any]:
    """The workers: each one's last heartbeat and its age (live when it beat within
    `LIVE_WITHIN`), its versions, what it runs now (its leases) and its last sweep; a worker
    holding leases without a heartbeat row (an older version) is listed too. Then the code
    versions workers run, and the last housekeeping sweeps."""
    now = app.now()
    running = app.store.running(1000)
    by_worker: dict[str, list[Occurrence]] = {}
    for o in running:
        by_worker.setdefault(o.worker or "?", []).append(o)
    sweeps = app.store.sweeps(20)
    beats = {w.name: w for w in app.store.workers(200)}
    rows = []
    for name in {*beats, *by_worker}:
        beat = beats.get(name)
        age = None if beat is None else (now - beat.heartbeat_at).total_seconds()
        rows.append(
            {
                "worker": name,
                "live": age is not None and age <= LIVE_WITHIN.total_seconds(),
                "heartbeat_at": None if beat is None else beat.heartbeat_at,
                "heartbeat_age_seconds": age,
                "started_at": None if beat is None else beat.started_at,
                "oncely_version": None if beat is None else beat.oncely_version,
                "code_version": None if beat is None else beat.code_version,
                "in_flight": len(by_worker.get(name, [])),
                "last_sweep_at": max(
                    (s.finished_at for s in sweeps if s.worker == name), default=None
                ),
            }
        )
    rows.sort(key=lambda r: (not r["live"], r["heartbeat_age_seconds"] is None,
                             r["heartbeat_age_seconds"] or 0, r["worker"]))  # fmt: skip
    return {
        "now": now,
        "worker_seen_at": worker_seen_at(app.store.code_versions(1)),
        "workers": rows,
        "versions": [
            {**asdict(v), "age_seconds": (now - v.last_seen_at).total_seconds()}
            for v in app.store.code_versions(20)
        ],
        "sweeps": [asdict(s) for s in sweeps],
    }


def locks(app: App) -> dict[str, Any]:
    """Every named lease on record: holder, fencing token, expiry, and whether it has expired
    (a stale lock) or is held."""
    now = app.now()
    return {
        "now": now,
        "locks": [
            {**asdict(lease), "held": lease.expires_at > now} for lease in app.store.leases(1000)
        ],
    }


def drift(app: App) -> dict[str, Any]:
    """Code against store: jobs this app declares that no schedule runs, and jobs stored
    schedules run that this app does not declare (no worker running this code runs them)."""
    counts = app.store.job_counts()
    declared = app.jobs
    return {
        "unscheduled": [
            {"job": name, "declared_with_trigger": job.trigger is not None}
            for name, job in sorted(declared.items())
            if name not in counts
        ],
        "undeclared": [
            {"job": name, "schedules": count}
            for name, count in sorted(counts.items())
            if name not in declared
        ],
    }


def backfill_preview(
    app: App, tenant: str | None, key: str, since: datetime, until: datetime
) -> dict[str, Any]:
    """The occurrences backfilling schedule ``key`` from ``since`` to ``until`` would create or
    re-arm, with those already recorded marked. Raises `UnknownSchedule`, `InvalidSchedule`."""
    source = app if tenant is None else app.for_tenant(tenant)
    explained = source.explain(key, upcoming=0, recent=0)
    trigger = explained.schedule.trigger
    if trigger is None:
        raise InvalidSchedule(f"schedule {key!r} has no readable trigger to backfill")
    if since > until:
        raise InvalidSchedule("the range starts after it ends; swap since and until")
    if until > explained.now:
        raise InvalidSchedule("a backfill range must be in the past")
    instances = []
    for instance in trigger.instances_within(since, until):
        instances.append(instance)
        if len(instances) > _BACKFILL_PREVIEW:
            raise InvalidSchedule(
                f"more than {_BACKFILL_PREVIEW} occurrences in that range; backfill less at a time"
            )
    recorded = {
        o.scheduled_for: o.status
        for o in source.history(key, since=since, until=until + timedelta(microseconds=1),
                                limit=_BACKFILL_PREVIEW + 1)
    }  # fmt: skip
    return {
        "key": key,
        "tenant": tenant,
        "since": since,
        "until": until,
        "occurrences": [
            {**instance_document(i), "recorded": recorded.get(i.at)} for i in instances
        ],
    }


def _row(o: Occurrence, now: datetime) -> dict[str, Any]:
    document = occurrence_document(o)
    document["summary"] = summary(o.error, 160) or o.reason or ""
    document["late"] = _late(o)
    return document


def _cell(o: Occurrence, now: datetime) -> dict[str, Any]:
    return {
        "scheduled_for": o.scheduled_for,
        "status": o.status,
        "late": _late(o),
        "title": f"{o.scheduled_for.isoformat()} {o.status}"
        + (f": {summary(o.error, 120) or o.reason}" if (o.error or o.reason) else ""),
    }


def _late(o: Occurrence) -> bool:
    return o.started_at is not None and o.started_at - o.scheduled_for > LATE_AFTER
