"""Scheduling from application code: one schedule or many, in one transaction, oncely's or the
caller's (docs/scheduling.md).

`App.schedule`, `App.defer` and their bulk forms `App.schedule_many`, `App.defer_many` (and the
same on `TenantView`) come here. A single call is a batch of one: each item is checked as the
single call checks it, then the store saves the batch in one transaction, so a bulk call keeps
every guarantee of the single one. An error about one item of a bulk call names the item (its
index and key) and nothing of the call is written.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from oncely.arguments import checked_key, checked_tenant, shown
from oncely.errors import (
    ConfigurationError,
    InvalidSchedule,
    OncelyError,
    TenantMismatch,
    UnknownJob,
)
from oncely.model import Planned, Saving, Schedule
from oncely.recurrence import At, Instance, RRule, Trigger, as_utc
from oncely.store import Store

if TYPE_CHECKING:
    from oncely.app import App
    from oncely.engine import Job

#: What an item of `App.defer_many` and of `App.schedule_many` may hold.
DEFER_FIELDS = frozenset({"at", "key", "payload", "tenant"})
SCHEDULE_FIELDS = frozenset({"trigger", "key", "payload", "tenant", "end"})


def declared_job(jobs: Mapping[str, Job], job: Job | str) -> Job:
    """The job ``job`` (a declared `Job` or its name) among ``jobs``; else `UnknownJob`."""
    name = getattr(job, "name", job)
    found = jobs.get(name) if isinstance(name, str) else None
    if found is None or (not isinstance(job, str) and found is not job):
        raise UnknownJob(
            f"{job!r} is not a job of this app; declare it with @app.job() first "
            f"(known: {', '.join(sorted(jobs)) or 'none'})"
        )
    return found


def defer(
    app: App,
    tenant: str | None,
    job: Job | str,
    at: datetime,
    key: str | None,
    payload: Any,
    connection: Any,
) -> Schedule:
    """`App.defer`: one durable one-off timer."""
    jobs = app.jobs
    item = defer_item(jobs, tenant, declared_job(jobs, job), at, key, payload)
    return _save(app, [item], connection)[0]


def schedule(
    app: App,
    tenant: str | None,
    job: Job | str,
    trigger: Trigger,
    key: str,
    payload: Any,
    end: datetime | None,
    connection: Any,
) -> Schedule:
    """`App.schedule`: create or replace one schedule."""
    within = within_of(connection)
    now = app.now()
    item = schedule_item(
        app, tenant, declared_job(app.jobs, job), trigger, key, payload, end, now, within
    )
    if isinstance(item, Schedule):
        return item
    return app.store.save_schedules([item], now, within=within)[0]


def defer_many(
    app: App,
    bound: str | None,
    job: Job | str,
    items: Iterable[Mapping[str, Any]],
    connection: Any,
) -> list[Schedule]:
    """`App.defer_many`: every item as `defer` takes it, all saved or none."""
    jobs = app.jobs
    found = declared_job(jobs, job)
    within = within_of(connection)
    batch: list[Saving] = []
    listed = _items(items, DEFER_FIELDS, "at")
    at_times: dict[tuple[datetime, int], tuple[At, Sequence[Planned]]] = {}
    try:
        for item in listed:
            batch.append(
                defer_item(
                    jobs,
                    _tenant(bound, item),
                    found,
                    item["at"],
                    item.get("key"),
                    item.get("payload"),
                    at_times,
                )
            )
    except OncelyError as exc:
        _name_item(exc, len(batch), listed[len(batch)].get("key"))
        raise
    return _saved_many(app, batch, within)


def schedule_many(
    app: App,
    bound: str | None,
    job: Job | str,
    items: Iterable[Mapping[str, Any]],
    connection: Any,
) -> list[Schedule]:
    """`App.schedule_many`: every item as `schedule` takes it, all saved or none."""
    found = declared_job(app.jobs, job)
    within = within_of(connection)
    now = app.now()
    batch: list[Saving | Schedule] = []
    listed = _items(items, SCHEDULE_FIELDS, "trigger", "key")
    try:
        for item in listed:
            batch.append(
                schedule_item(
                    app,
                    _tenant(bound, item),
                    found,
                    item["trigger"],
                    item["key"],
                    item.get("payload"),
                    item.get("end"),
                    now,
                    within,
                )
            )
    except OncelyError as exc:
        _name_item(exc, len(batch), listed[len(batch)].get("key"))
        raise
    saving = [item for item in batch if isinstance(item, Saving)]
    saved = iter(_saved_many(app, saving, within))
    return [item if isinstance(item, Schedule) else next(saved) for item in batch]


def defer_item(
    jobs: Mapping[str, Job],
    tenant: str | None,
    job: Job,
    at: datetime,
    key: str | None,
    payload: Any,
    at_times: dict[tuple[datetime, int], tuple[At, Sequence[Planned]]] | None = None,
) -> Saving:
    """The checked save of a one-off of ``job`` at ``at``; raises as `App.defer` does.

    ``at_times``: the triggers of a call's earlier items, by their time; items deferred to the
    same instant share one trigger and its occurrence (computed per item, a tenth of a bulk
    defer's time). Keyed with the fold too: two times of one zone that differ only in fold
    compare equal and are an hour apart.
    """
    shared = at_times.get((at, at.fold)) if at_times is not None and type(at) is datetime else None
    if shared is None:
        trigger = At(as_utc(at, "at"))
        shared = (trigger, (Planned(trigger.instance, origin="defer"),))
        if at_times is not None and type(at) is datetime:
            at_times[at, at.fold] = shared
    keyless = key is None
    key = key if key is not None else f"{job.name}:{secrets.token_hex(16)}"
    check_key(jobs, tenant, key)
    return Saving(
        tenant, key, job.name, shared[0], payload, occurrences=shared[1], keyless=keyless,
        guard_horizon=not keyless,
    )  # fmt: skip


def schedule_item(
    app: App,
    tenant: str | None,
    job: Job,
    trigger: Trigger,
    key: str,
    payload: Any,
    end: datetime | None,
    now: datetime,
    within: Any,
) -> Saving | Schedule:
    """The checked save of schedule ``key``, or the schedule itself when saving it would change
    nothing (an unchanged rule whose series has ended); raises as `App.schedule` does."""
    check_key(app.jobs, tenant, key)
    if not isinstance(trigger, Trigger):
        raise InvalidSchedule(
            f"{trigger!r} is not a trigger",
            hint="pass oncely.cron(...), oncely.every(...), oncely.rrule(...) or oncely.at(...)",
        )
    starts_now: datetime | None = None
    kept: Schedule | None = None
    if isinstance(trigger, RRule):
        if end is not None:
            trigger = trigger.with_end(as_utc(end, "end"))
        if trigger.start is None and trigger.rule.start is None:
            kept = _same_rule_stored(app.store, tenant, key, trigger, within)
            if kept is None:
                starts_now = now.replace(microsecond=0)
            start = kept.trigger.start if kept and isinstance(kept.trigger, RRule) else None
            trigger = trigger.with_start(start or starts_now or now)
    elif end is not None:
        raise InvalidSchedule(
            f"end= applies to rrule schedules, and this one is {trigger.kind}",
            hint="cron and every schedules are perpetual by design; unschedule() stops one",
        )
    if starts_now is not None:
        # A rule that counts from now fires first now: from just after its start,
        # FREQ=DAILY;COUNT=3 fired twice.
        first = next((i.at for i in trigger.instances_from(starts_now)), None)
    else:
        first = trigger.next_after(now)
    if first is None and kept is not None and kept.job == job.name:
        # Saved again unchanged once its series ended (code that saves it at each start): that
        # changes nothing, as saving an unchanged rule does while it still fires.
        return kept
    if first is None:
        raise InvalidSchedule(
            f"{trigger!r} never fires after {now.isoformat()}",
            hint="check its UNTIL, COUNT, end or start; app.defer() runs a job once",
        )
    return Saving(tenant, key, job.name, trigger, payload, next_run_at=first)


def within_of(connection: Any) -> Any:
    """The driver connection behind a caller's ``connection=`` (None: oncely's own)."""
    if connection is None:
        return None
    from oncely.integrations import driver_connection

    return driver_connection(connection)


def check_key(jobs: Mapping[str, Job], tenant: str | None, key: str) -> None:
    """Raise `InvalidSchedule` for a key or tenant no store can keep, or a key that is the
    schedule of a job this app declares in code (one of ``jobs``)."""
    checked_key(key)
    if tenant is not None:
        checked_tenant(tenant)
        return
    declared = jobs.get(key)
    if declared is not None and declared.trigger is not None:
        raise InvalidSchedule(
            f"key {key!r} is the schedule of job {key!r}, declared in code",
            hint="choose another key, e.g. f'{job}:{id}'",
        )


def instance_at(when: datetime) -> Instance:
    """The one instance of a one-off at ``when`` (deferred, or triggered by hand)."""
    # Not next(instances_from(when)): that looks from a microsecond before, which for the
    # first instant datetime holds raised OverflowError.
    return At(when).instance


def _same_rule_stored(
    store: Store, tenant: str | None, key: str, trigger: RRule, within: Any
) -> Schedule | None:
    """The schedule ``key`` when it already holds this same rule, with its start: saving an
    unchanged rule keeps its series (given ``now`` as its start again, FREQ=DAILY saved at 08:00
    and again at 14:37 moved to 14:37)."""
    from oncely.errors import UnknownSchedule

    try:
        schedule = store.get_schedule(tenant, key, within=within)
    except UnknownSchedule:
        return None
    stored = schedule.trigger
    if not isinstance(stored, RRule) or stored.start is None:
        return None
    if trigger.with_start(stored.start).to_spec() != stored.to_spec():
        return None
    return schedule


def _save(app: App, batch: Sequence[Saving], connection: Any) -> list[Schedule]:
    return app.store.save_schedules(batch, app.now(), within=within_of(connection))


def _saved_many(app: App, batch: Sequence[Saving], within: Any) -> list[Schedule]:
    seen: dict[tuple[str | None, str], int] = {}
    for index, item in enumerate(batch):
        earlier = seen.setdefault((item.tenant, item.key), index)
        if earlier != index:
            # One statement cannot update a row twice; and which of the two was meant?
            raise InvalidSchedule(
                f"items {earlier} and {index} both have key {item.key!r}"
                + (f" in tenant {item.tenant!r}" if item.tenant is not None else ""),
                hint="a call saves each key once; keep one of them",
            )
    try:
        return app.store.save_schedules(batch, app.now(), within=within)
    except OncelyError as exc:
        if exc.item is not None:
            item = batch[exc.item]
            _name_item(exc, exc.item, None if item.keyless else item.key)
        raise


def _items(
    items: Iterable[Mapping[str, Any]], fields: frozenset[str], *required: str
) -> list[Mapping[str, Any]]:
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise ConfigurationError(
            f"items={shown(items)} is not a list of items; pass a list of dicts, each with "
            f"{', '.join(sorted(fields))}"
        )
    listed = list(items)
    for index, item in enumerate(listed):
        if not isinstance(item, Mapping):
            raise InvalidSchedule(
                f"{_where(index, None)}: {shown(item)} is not a dict",
                hint=f"each item is a dict with {', '.join(sorted(fields))}",
            )
        if not fields.issuperset(item):
            unknown = sorted(str(name) for name in set(item) - fields)
            raise InvalidSchedule(
                f"{_where(index, item.get('key'))}: {', '.join(unknown)} is not something an "
                "item holds",
                hint=f"an item holds {', '.join(sorted(fields))}",
            )
        missing = [name for name in required if name not in item]
        if missing:
            where = _where(index, item.get("key"))
            raise InvalidSchedule(f"{where}: it has no {', '.join(missing)}")
    return listed


def _tenant(bound: str | None, item: Mapping[str, Any]) -> str | None:
    """The tenant of ``item`` on an app (``bound`` None) or a view bound to ``bound``."""
    tenant = item.get("tenant")
    if bound is None:
        return None if tenant is None else checked_tenant(tenant)
    if tenant is not None and checked_tenant(tenant) != bound:
        raise TenantMismatch(
            f"this view is bound to tenant {bound!r} and was asked to write to tenant "
            f"{tenant!r}; use app.for_tenant({tenant!r}) for that tenant"
        )
    return bound


def _name_item(exc: OncelyError, index: int, key: Any) -> None:
    exc.item = index
    exc.args = (f"{_where(index, key)}: {exc}", *exc.args[1:])


def _where(index: int, key: Any) -> str:
    return f"item {index} (no key)" if key is None else f"item {index} (key {shown(key)})"
