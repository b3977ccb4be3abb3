"""Rows to vocabulary, shared by both dialects once each has turned its types into Python's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

from oncely.errors import InvalidSchedule, UnknownSchedule
from oncely.model import (
    NO_TENANT,
    TIMED_OUT,
    Abandoned,
    Action,
    Attempt,
    AttemptOutcome,
    Occurrence,
    OccurrenceOrigin,
    OccurrenceStatus,
    Schedule,
    ScheduleOrigin,
    ScheduleStatus,
    WorkerBeat,
)
from oncely.recurrence import Trigger, trigger_from_spec
from oncely.store import payloads


def listing_params(
    tenant: str | None,
    all_tenants: bool,
    job: str | None,
    status: ScheduleStatus | None,
    prefix: str | None,
    after: tuple[str | None, str] | None,
    limit: int | None,
) -> dict[str, Any]:
    """The parameters of ``select_schedules``."""
    return {
        "tenant": tenant_column(tenant),
        "all_tenants": all_tenants,
        "job": job,
        "status": status,
        "prefix": prefix,
        "after_tenant": None if after is None else tenant_column(after[0]),
        "after_key": None if after is None else after[1],
        "limit": limit,
    }


def tenant_column(tenant: str | None) -> str:
    """The stored form of ``tenant``: '' for none, because NULL is not a value (lesson 5)."""
    return NO_TENANT if tenant is None else tenant


def tenant_of(column: str) -> str | None:
    """The tenant a stored ``tenant`` column holds: `tenant_column` undone."""
    return None if column == NO_TENANT else column


def schedule(values: Mapping[str, Any]) -> Schedule:
    """Map one schedule row, with Python types, to a `Schedule`.

    A stored trigger that no longer reads gives ``trigger=None`` and status ``invalid`` with the
    reason, instead of an error: one bad row must not stop the listing of the others. So does a
    stored payload that does not read (``payload=None``); its occurrences fail with the reason.
    """
    status = cast(ScheduleStatus, values["status"])
    reason = values["status_reason"]
    trigger: Trigger | None
    try:
        trigger = trigger_from_spec(values["trigger_spec"], schedule=values["key"])
    except InvalidSchedule as exc:
        trigger, status, reason = None, "invalid", str(exc)
    payload = values["payload"]
    if isinstance(payload, payloads.Unreadable):
        status, reason, payload = "invalid", f"{payload.reason}; save it again", None
    next_run_at = utc(values["next_run_at"])
    return Schedule(
        key=values["key"],
        job=values["job"],
        trigger=trigger,
        next_run_at=next_run_at if status == "active" else None,
        paused=bool(values["paused"]),
        paused_until=utc(values.get("paused_until")),
        status=status,
        tenant=tenant_of(values["tenant"]),
        payload=payload,
        origin=cast(ScheduleOrigin, values["origin"]),
        status_reason=reason,
        created_at=utc(values["created_at"]),
        updated_at=utc(values["updated_at"]),
    )


def utc(value: datetime | None) -> datetime | None:
    """Times leave the store in UTC, whatever zone the database session uses."""
    return None if value is None else value.astimezone(UTC)


def known(found: Schedule | None, tenant: str | None, key: str) -> Schedule:
    """``found``, or `UnknownSchedule` naming the key (and tenant) that matched nothing."""
    if found is None:
        raise unknown_schedule(tenant, key)
    return found


def unknown_schedule(tenant: str | None, key: str) -> UnknownSchedule:
    """The error for key ``key`` (in ``tenant``) matching no schedule."""
    where = f" in tenant {tenant!r}" if tenant is not None else ""
    return UnknownSchedule(f"no schedule has key {key!r}{where}; app.schedules() lists them")


def occurrence(values: Mapping[str, Any]) -> Occurrence:
    """Map one history row, with Python types, to an `Occurrence`."""
    wall = values["local_wall"]
    return Occurrence(
        key=values["key"],
        scheduled_for=values["scheduled_for"].astimezone(UTC),
        status=cast(OccurrenceStatus, values["status"]),
        attempts=values["attempts"],
        started_at=utc(values["started_at"]),
        finished_at=utc(values["finished_at"]),
        worker=values["worker"],
        error=values["error"],
        tenant=tenant_of(values["tenant"]),
        reason=values["reason"],
        local_wall=None if wall is None else datetime.fromisoformat(wall),
        fold=values["fold"],
        dst=values["dst_note"],
        ordinal=values["ordinal"],
        origin=cast(OccurrenceOrigin, values["origin"]),
        retry_at=utc(values["run_after"]) if values["status"] == "retrying" else None,
        lease_expires_at=utc(values["lease_expires_at"]),
        fence=values["fence"],
    )


#: The most attempts of one occurrence kept besides its row's last one. Retries bound them
#: already (a lost attempt counts as one); this bounds an occurrence retried by hand again and
#: again, or a job declared with a huge ``retries``: each kept attempt holds up to 8,000
#: characters of error.
ATTEMPTS_KEPT = 100

# The statuses in which the occurrence row holds an attempt that is not kept (the last one).
_ROW_ATTEMPT: dict[str, AttemptOutcome] = {
    "running": "running",
    "succeeded": "succeeded",
    "failed": "failed",
    "abandoned": "abandoned",
}


def attempts(found: Mapping[str, Any], kept: Sequence[Mapping[str, Any]]) -> list[Attempt]:
    """The attempts of one ``select_occurrence`` row ``found``: its ``kept`` ones (rows of
    ``select_attempts``), then the one its row holds, when it holds one not kept."""
    listed = [
        _attempt(
            row["attempt"],
            cast(AttemptOutcome, row["outcome"]),
            row,
            row["error"],
        )
        for row in kept
    ]
    outcome = _ROW_ATTEMPT.get(found["status"])
    number = found["attempts"]
    if outcome is not None and number > 0 and all(a.number != number for a in listed):
        # The row's error is the attempt before's unless this one failed: a claim keeps it, and
        # abandoning writes a reason instead.
        error = found["error"] if outcome == "failed" else None
        if outcome == "abandoned":
            error = found["reason"]
        last = _attempt(number, outcome, found, error)
        if outcome == "running":
            last = replace(last, finished_at=None, lease_expires_at=utc(found["lease_expires_at"]))
        listed.append(last)
    return listed


def _attempt(
    number: int, outcome: AttemptOutcome, values: Mapping[str, Any], error: str | None
) -> Attempt:
    if outcome == "failed" and error is not None and error.startswith(TIMED_OUT):
        outcome = "timed_out"
    return Attempt(
        number=number,
        outcome=outcome,
        started_at=utc(values["started_at"]),
        finished_at=utc(values["finished_at"]),
        worker=values["worker"],
        fence=values["fence"],
        error=error,
    )


def abandoned(values: Mapping[str, Any]) -> Abandoned:
    """Map one ``expired_of_jobs`` row, with Python types, to an `Abandoned`."""
    return Abandoned(
        key=values["key"],
        tenant=tenant_of(values["tenant"]),
        scheduled_for=values["scheduled_for"].astimezone(UTC),
        owner=values["lease_owner"],
        attempts=values["attempts"],
        job=values["job"],
    )


def action(values: Mapping[str, Any]) -> Action:
    """Map one ``select_actions`` row to an `Action`."""
    return Action(
        at=values["at"].astimezone(UTC),
        key=values["key"],
        tenant=tenant_of(values["tenant"]),
        action=values["action"],
        actor=values["actor"],
        reason=values["reason"],
        detail=values["detail"],
    )


def action_params(action: Action) -> dict[str, Any]:
    """The parameters of ``insert_action``, its time still a datetime."""
    return {
        "at": action.at,
        "tenant": tenant_column(action.tenant),
        "key": action.key,
        "action": action.action,
        "actor": action.actor,
        "reason": action.reason,
        "detail": action.detail,
    }


def pause_ended(values: Mapping[str, Any], now: datetime, actor: str) -> Action:
    """The `Action` recording that the pause of schedule row ``values`` ended by itself."""
    until = utc(values["paused_until"])
    assert until is not None
    return Action(
        now,
        values["key"],
        tenant_of(values["tenant"]),
        "resume",
        actor,
        f"the pause until {until.isoformat()} ended",
        "resumed by itself",
    )


def worker(values: Mapping[str, Any]) -> WorkerBeat:
    """Map one ``select_workers`` row, with Python types, to a `WorkerBeat`."""
    return WorkerBeat(
        name=values["name"],
        started_at=values["started_at"].astimezone(UTC),
        heartbeat_at=values["heartbeat_at"].astimezone(UTC),
        oncely_version=values["oncely_version"],
        code_version=values["code_version"],
    )
