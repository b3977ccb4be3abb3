"""Rows to vocabulary, shared by both dialects once each has turned its types into Python's."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

from oncely.errors import ConfigurationError, InvalidSchedule, OncelyError, UnknownSchedule
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
    Planned,
    Saving,
    Schedule,
    ScheduleOrigin,
    ScheduleStatus,
    WorkerBeat,
)
from oncely.recurrence import Trigger, trigger_from_spec
from oncely.store import payloads

SCHEDULE_COLUMNS = (
    "id", "tenant", "key", "job", "origin", "trigger_spec", "payload", "paused", "status",
    "status_reason", "next_run_at", "created_at", "updated_at",
)  # fmt: skip


def schedule_params(
    *,
    tenant: str | None,
    key: str,
    job: str,
    origin: ScheduleOrigin,
    trigger: Trigger,
    payload: Any,
    next_run_at: datetime | None,
    now: datetime,
    keyless: bool = False,
    trigger_spec: str | None = None,
) -> dict[str, Any]:
    """The parameters of ``upsert_schedule``, times still as datetimes; raises `InvalidPayload`.
    ``trigger_spec``: the trigger's `spec_text`, when the caller has it already."""
    return {
        "keyless": keyless,
        "tenant": tenant_column(tenant),
        "key": key,
        "job": job,
        "origin": origin,
        "trigger_kind": trigger.kind,
        "trigger_spec": spec_text(trigger) if trigger_spec is None else trigger_spec,
        "payload": payloads.encode(payload),
        "status": "active" if next_run_at is not None else "ended",
        "next_run_at": next_run_at,
        "now": now,
    }


# insert_occurrence plans a row skipped with one of these reasons anew (matched by the prefix
# before the colon): it never started, and an edit that plans its time again wants it to run.
SUPERSEDED = "superseded: the schedule's trigger changed before this occurrence ran"
REMOVED = "unscheduled: the schedule was removed before this occurrence ran"


def save_params(
    existing: Mapping[str, Any] | None, params: dict[str, Any]
) -> tuple[dict[str, Any], bool]:
    """The ``upsert_schedule`` parameters over the ``existing`` row, and whether the future is
    replaced (the old trigger's pending occurrences are then skipped).

    Saving the trigger a schedule already has keeps its next run: an app that re-saves its
    schedules on every start, or a deferred timer saved twice, must not fire early, twice or never.

    A code-declared job never takes the key of a runtime schedule, nor a runtime schedule the
    key of a code-declared one (unless that one was removed): `ConfigurationError` for the
    first, raised at start by reconcile, `InvalidSchedule` for the second.
    """
    if existing is None:
        return params, False
    _refuse_other_origin(existing, params)
    same = _stored_spec(existing) == json.loads(params["trigger_spec"])
    if same and existing["status"] in ("active", "ended"):
        kept = existing["next_run_at"]
        return {**params, "next_run_at": kept, "status": "active" if kept else "ended"}, False
    return params, True


#: Items of `Store.save_schedules` per PostgreSQL statement: each takes its rows as one JSON
#: parameter, so this bounds the statement's size, not its parameters.
SAVE_CHUNK = 1_000


def batch_params(batch: Sequence[Saving], now: datetime) -> list[dict[str, Any]]:
    """`item_params` of each item of ``batch``; an error says which item (``.item``)."""
    params: list[dict[str, Any]] = []
    # By trigger identity: the one-offs of a bulk defer at one time share their trigger.
    specs: dict[int, str] = {}
    try:
        for item in batch:
            spec = specs.get(id(item.trigger))
            if spec is None:
                spec = specs[id(item.trigger)] = spec_text(item.trigger)
            params.append(item_params(item, now, spec))
    except OncelyError as exc:
        exc.item = len(params)
        raise
    return params


def item_params(item: Saving, now: datetime, trigger_spec: str | None = None) -> dict[str, Any]:
    """`schedule_params` of one `Saving`; raises `InvalidPayload`."""
    return schedule_params(
        tenant=item.tenant,
        key=item.key,
        job=item.job,
        origin=item.origin,
        trigger=item.trigger,
        payload=item.payload,
        next_run_at=item.next_run_at,
        now=now,
        keyless=item.keyless,
        trigger_spec=trigger_spec,
    )


def spec_text(trigger: Trigger) -> str:
    """The stored JSON text of ``trigger``'s spec."""
    return json.dumps(trigger.to_spec(), sort_keys=True)


def refuse_before_horizon(
    existing: Mapping[str, Any] | None,
    params: Mapping[str, Any],
    when: datetime,
    horizon: datetime | None,
) -> None:
    """Refuse to move the one-off ``params`` to ``when`` before the history ``horizon``: history
    there may have been pruned, and a timer moved away and back ran again where it had run."""
    if horizon is None or when >= horizon or existing is None:
        return  # a new timer: nothing of it can have run
    # An unscheduled timer deferred again is saved anew: one that had run there, was
    # unscheduled and then pruned ran a second time.
    unchanged = _stored_spec(existing) == json.loads(params["trigger_spec"])
    if unchanged and existing["status"] != "removed":
        return  # saving it again changes nothing
    raise InvalidSchedule(
        f"timer {params['key']!r} cannot be deferred to {when.isoformat()}: history before "
        f"{horizon.isoformat()} has been pruned (retention), so oncely cannot tell whether it "
        "already ran then",
        hint="defer it at a later time, or under a new key",
    )


def saved(values: Mapping[str, Any], item: Saving) -> Schedule:
    """The `Schedule` an upsert of ``item`` returned, from the item's own trigger and payload:
    reading them back from the row parsed every trigger again, most of a bulk defer's time."""
    status = cast(ScheduleStatus, values["status"])
    return Schedule(
        key=item.key,
        job=item.job,
        trigger=item.trigger,
        next_run_at=_utc(values["next_run_at"]) if status == "active" else None,
        paused=bool(values["paused"]),
        paused_until=_utc(values.get("paused_until")),
        status=status,
        tenant=item.tenant,
        payload=item.payload,
        origin=item.origin,
        status_reason=None,
        created_at=_utc(values["created_at"]),
        updated_at=_utc(values["updated_at"]),
    )


def _stored_spec(existing: Mapping[str, Any]) -> Any:
    stored = existing["trigger_spec"]
    if isinstance(stored, str):  # SQLite keeps JSON as text; a damaged one is simply different
        try:
            return json.loads(stored)
        except ValueError:
            return None
    return stored


def _refuse_other_origin(existing: Mapping[str, Any], params: Mapping[str, Any]) -> None:
    if existing["origin"] == params["origin"] or existing["status"] == "removed":
        return
    key = params["key"]
    if params["origin"] == "code":
        # It replaced the runtime schedule's job, trigger and payload, with only a warning.
        raise ConfigurationError(
            f"job {params['job']!r}, declared in code with a trigger, has the key of the runtime "
            f"schedule {key!r} of job {existing['job']!r} (saved by app.schedule or app.defer): "
            f"rename the job (name=...), or unschedule the runtime schedule {key!r}"
        )
    raise InvalidSchedule(
        f"key {key!r} is the schedule of job {existing['job']!r}, declared in code",
        hint="choose another key, e.g. f'{job}:{id}'",
    )


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
    next_run_at = _utc(values["next_run_at"])
    return Schedule(
        key=values["key"],
        job=values["job"],
        trigger=trigger,
        next_run_at=next_run_at if status == "active" else None,
        paused=bool(values["paused"]),
        paused_until=_utc(values.get("paused_until")),
        status=status,
        tenant=tenant_of(values["tenant"]),
        payload=payload,
        origin=cast(ScheduleOrigin, values["origin"]),
        status_reason=reason,
        created_at=_utc(values["created_at"]),
        updated_at=_utc(values["updated_at"]),
    )


def _utc(value: datetime | None) -> datetime | None:
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


def saved_occurrences(
    planned: Sequence[tuple[Mapping[str, Any], Planned]], time: Callable[[datetime], Any]
) -> list[dict[str, Any]]:
    """The rows of ``insert_saved_occurrences``: each occurrence planned with its schedule's row,
    times written by the dialect's ``time``."""
    # By identity: the one-offs of a bulk defer at one time share their planned occurrence,
    # whose times are written once.
    written: dict[int, dict[str, Any]] = {}
    rows = []
    for schedule, occurrence in planned:
        fields = written.get(id(occurrence))
        if fields is None:
            fields = written[id(occurrence)] = _occurrence_fields(occurrence, time)
        rows.append({"tenant": schedule["tenant"], "key": schedule["key"], **fields})
    return rows


def _occurrence_fields(planned: Planned, time: Callable[[datetime], Any]) -> dict[str, Any]:
    instance = planned.instance
    return {
        "scheduled_for": time(instance.at),
        "local_wall": instance.wall.isoformat(),
        "fold": instance.fold,
        "dst_note": instance.dst,
        "ordinal": instance.ordinal,
        "origin": planned.origin,
        "status": planned.status,
        "reason": planned.reason,
    }


def occurrence_params(
    schedule_id: int, tenant: str, planned: Planned, now: datetime
) -> dict[str, Any]:
    """The parameters of ``insert_occurrence``, times still as datetimes."""
    instance = planned.instance
    return {
        "schedule_id": schedule_id,
        "tenant": tenant,
        "scheduled_for": instance.at,
        "local_wall": instance.wall.isoformat(),
        "fold": instance.fold,
        "dst_note": instance.dst,
        "ordinal": instance.ordinal,
        "origin": planned.origin,
        "status": planned.status,
        "reason": planned.reason,
        "run_after": instance.at,
        "now": now,
    }


def occurrence(values: Mapping[str, Any]) -> Occurrence:
    """Map one history row, with Python types, to an `Occurrence`."""
    wall = values["local_wall"]
    return Occurrence(
        key=values["key"],
        scheduled_for=values["scheduled_for"].astimezone(UTC),
        status=cast(OccurrenceStatus, values["status"]),
        attempts=values["attempts"],
        started_at=_utc(values["started_at"]),
        finished_at=_utc(values["finished_at"]),
        worker=values["worker"],
        error=values["error"],
        tenant=tenant_of(values["tenant"]),
        reason=values["reason"],
        local_wall=None if wall is None else datetime.fromisoformat(wall),
        fold=values["fold"],
        dst=values["dst_note"],
        ordinal=values["ordinal"],
        origin=cast(OccurrenceOrigin, values["origin"]),
        retry_at=_utc(values["run_after"]) if values["status"] == "retrying" else None,
        lease_expires_at=_utc(values["lease_expires_at"]),
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
            last = replace(last, finished_at=None, lease_expires_at=_utc(found["lease_expires_at"]))
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
        started_at=_utc(values["started_at"]),
        finished_at=_utc(values["finished_at"]),
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
    until = _utc(values["paused_until"])
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
