"""What a save writes: schedules and their planned occurrences as statement parameters, and
the checks a save makes against what is stored."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from oncely.errors import ConfigurationError, InvalidSchedule, OncelyError
from oncely.model import (
    Planned,
    Saving,
    Schedule,
    ScheduleStatus,
)
from oncely.recurrence import Trigger
from oncely.store import payloads
from oncely.store.records import tenant_column, utc

SCHEDULE_COLUMNS = (
    "id", "tenant", "key", "job", "origin", "trigger_spec", "payload", "paused", "status",
    "status_reason", "next_run_at", "created_at", "updated_at",
)  # fmt: skip


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
    """`_item_params` of each item of ``batch``; an error says which item (``.item``)."""
    params: list[dict[str, Any]] = []
    # By trigger identity: the one-offs of a bulk defer at one time share their trigger.
    specs: dict[int, str] = {}
    try:
        for item in batch:
            spec = specs.get(id(item.trigger))
            if spec is None:
                spec = specs[id(item.trigger)] = spec_text(item.trigger)
            params.append(_item_params(item, now, spec))
    except OncelyError as exc:
        exc.item = len(params)
        raise
    return params


def _item_params(item: Saving, now: datetime, trigger_spec: str) -> dict[str, Any]:
    """The parameters of ``upsert_schedules`` for one `Saving`, times still as datetimes;
    ``trigger_spec`` is its trigger's `spec_text`. Raises `InvalidPayload`."""
    return {
        "keyless": item.keyless,
        "tenant": tenant_column(item.tenant),
        "key": item.key,
        "job": item.job,
        "origin": item.origin,
        "trigger_kind": item.trigger.kind,
        "trigger_spec": trigger_spec,
        "payload": payloads.encode(item.payload),
        "status": "active" if item.next_run_at is not None else "ended",
        "next_run_at": item.next_run_at,
        "now": now,
    }


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
        next_run_at=utc(values["next_run_at"]) if status == "active" else None,
        paused=bool(values["paused"]),
        paused_until=utc(values.get("paused_until")),
        status=status,
        tenant=item.tenant,
        payload=item.payload,
        origin=item.origin,
        status_reason=None,
        created_at=utc(values["created_at"]),
        updated_at=utc(values["updated_at"]),
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
    return {
        "schedule_id": schedule_id,
        "tenant": tenant,
        **_occurrence_fields(planned, lambda time: time),
        "run_after": planned.instance.at,
        "now": now,
    }
