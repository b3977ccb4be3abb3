"""oncely's vocabulary: what the store returns and the public API hands out.

Database rows are mapped to these inside `oncely.store` and never leave it as rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from oncely.recurrence import Instance, Trigger

ScheduleStatus = Literal["active", "ended", "invalid", "removed"]
ScheduleOrigin = Literal["code", "api"]
NO_TENANT = ""


@dataclass(frozen=True, slots=True)
class Schedule:
    """A key, the job it runs, its trigger, and where it stands.

    ``trigger`` is None only when the stored trigger no longer reads (``status == "invalid"``, with
    ``status_reason`` saying why): one bad stored rule stops its own schedule and nothing else.
    ``tenant`` is None for a schedule that belongs to no tenant. ``next_run_at`` is the next
    occurrence not yet materialised, None when there is none (ended, invalid or removed).
    ``paused_until``: when a pause ends by itself (``App.pause(key, until=...)``); None when it
    lasts until resumed, or the schedule is not paused.
    """

    key: str
    job: str
    trigger: Trigger | None
    next_run_at: datetime | None
    paused: bool
    status: ScheduleStatus
    tenant: str | None = None
    payload: Any = None
    origin: ScheduleOrigin = "api"
    status_reason: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    paused_until: datetime | None = None


OccurrenceStatus = Literal[
    "pending", "running", "succeeded", "retrying", "failed", "skipped", "abandoned", "invalid"
]
OccurrenceOrigin = Literal["schedule", "trigger", "backfill", "defer"]


@dataclass(frozen=True, slots=True)
class Planned:
    """An occurrence the engine has decided to record: when, and whether it is to run.

    ``status`` is ``pending`` (to run from its scheduled time) or ``skipped`` with a ``reason``
    (a misfire or an overlap): what did not run is recorded too, because "why didn't it fire?" is
    the question users ask.
    """

    instance: Instance
    status: Literal["pending", "skipped"] = "pending"
    reason: str | None = None
    origin: OccurrenceOrigin = "schedule"


@dataclass(frozen=True, slots=True)
class Materialisation:
    """Occurrences to record for schedule (tenant, key) and where its next run moves: one item
    of `Store.materialise_many`, applied only if the schedule's next run still is
    ``expected_next_run_at``.

    ``stale_before``: pending occurrences of the schedule's own series before this time, never
    started, are skipped with ``stale_reason``: a newer one planned now supersedes them (rows
    materialised just before every worker stopped, found on restart).
    """

    tenant: str | None
    key: str
    planned: Sequence[Planned]
    expected_next_run_at: datetime | None
    next_run_at: datetime | None
    overlap: Overlap = "allow"
    stale_before: datetime | None = None
    stale_reason: str | None = None


SkipCause = Literal["misfire", "overlap"]
"""Why an occurrence was skipped, as ``oncely_occurrences_skipped_total`` labels it: ``misfire``
(too late for its grace, or superseded by a newer occurrence under ``misfire="skip"`` or
``"latest"``) or ``overlap`` (the previous one of its schedule had not finished)."""


def skip_cause(reason: str) -> SkipCause:
    """The `SkipCause` of a skipped occurrence's stored ``reason`` (each starts with it)."""
    return "overlap" if reason.startswith("overlap:") else "misfire"


@dataclass(frozen=True, slots=True)
class Skipped:
    """An occurrence of ``job`` that one store call recorded as skipped: that call wrote the row
    (one written by another process, or there already, is not one)."""

    job: str
    cause: SkipCause


@dataclass(frozen=True, slots=True)
class Materialised:
    """What `Store.materialise_many` wrote: ``new`` occurrences, and of them, or of pending ones
    superseded, ``skipped`` (one per row)."""

    new: int = 0
    skipped: Sequence[Skipped] = ()


@dataclass(frozen=True, slots=True)
class Saving:
    """One schedule to save: an item of `Store.save_schedules`, all of whose arguments have been
    checked by the caller except the payload, which the store encodes.

    ``occurrences`` are recorded only when the schedule is new or its future replaced (a
    deferred one-off's single run). ``guard_horizon``: a one-off refused when it would move its
    stored time to one before the history horizon (see `Store.history_horizon`).
    """

    tenant: str | None
    key: str
    job: str
    trigger: Trigger
    payload: Any = None
    next_run_at: datetime | None = None
    origin: ScheduleOrigin = "api"
    occurrences: Sequence[Planned] = ()
    keyless: bool = False
    guard_horizon: bool = False


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One (schedule, scheduled time) and what became of it: a row of history.

    ``retry_at`` is when a ``retrying`` occurrence runs again; ``lease_expires_at`` is when the
    lease of a ``running`` one expires (and ``worker`` holds it). Both are None otherwise.
    ``fence`` is the fencing token of its latest attempt's lease (`Run.fence`), None before any.
    """

    key: str
    scheduled_for: datetime
    status: OccurrenceStatus
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None
    worker: str | None
    error: str | None
    tenant: str | None = None
    reason: str | None = None
    local_wall: datetime | None = None
    fold: int = 0
    dst: str | None = None
    ordinal: int | None = None
    origin: OccurrenceOrigin = "schedule"
    retry_at: datetime | None = None
    lease_expires_at: datetime | None = None
    fence: int | None = None


AttemptOutcome = Literal["running", "succeeded", "failed", "timed_out", "lost", "abandoned"]
#: How the error of an attempt failed by its job's ``timeout`` begins (`Attempt.outcome`
#: ``timed_out`` is read from it).
TIMED_OUT = "timed out: "


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of an occurrence: when it started and ended, which worker ran it under which
    fence (`Run.fence`), and how it ended.

    ``outcome``: ``running`` (still, under a lease until ``lease_expires_at``), ``succeeded``,
    ``failed`` (the handler raised, or oncely refused to run it), ``timed_out`` (still running
    past its job's ``timeout``), ``lost`` (its worker's lease expired and the occurrence was
    taken over or reclaimed), ``abandoned`` (an at_most_once attempt whose worker was lost).
    ``error`` is the failure with its traceback, cut as `Occurrence.error` is, or what lost or
    abandoned it; None for one that succeeded or still runs. ``finished_at`` of a lost attempt
    is when its loss was found, not when its worker died.
    """

    number: int
    outcome: AttemptOutcome
    started_at: datetime | None
    finished_at: datetime | None
    worker: str | None
    fence: int | None
    error: str | None = None
    lease_expires_at: datetime | None = None


Overlap = Literal["skip", "buffer_one", "allow"]


@dataclass(frozen=True, slots=True)
class Claim:
    """One attempt at one occurrence, held under a lease by ``owner`` until ``lease_expires_at``.

    ``fence`` is strictly greater than the fence of every earlier claim on the same schedule, so a
    write carrying it can be told apart from one by a worker whose lease was taken over.
    ``reclaimed`` is True when the previous attempt's worker was lost (its lease expired).
    ``failure_streak`` is the schedule's count of failed occurrences in a row when claimed.
    ``run_after`` is when the attempt may start: a claim taken ahead of it waits until then.
    ``held_until`` is when the schedule's previous occurrence finished, if after this one's time:
    until then a serial job could not start it, so lateness counts from there.
    """

    occurrence_id: int
    schedule_id: int
    tenant: str | None
    key: str
    job: str
    payload: Any
    scheduled_for: datetime
    attempt: int
    fence: int
    owner: str
    lease_expires_at: datetime
    origin: OccurrenceOrigin
    run_after: datetime
    reclaimed: bool = False
    failure_streak: int = 0
    held_until: datetime | None = None


class Claims(list[Claim]):
    """The claims one `Store.claim_due` took, and the occurrences it recorded as ``skipped`` on
    the way (overlap): a list of `Claim`, so that a caller that wants only the claims has them."""

    def __init__(self, claims: Iterable[Claim] = (), skipped: Iterable[Skipped] = ()) -> None:
        super().__init__(claims)
        self.skipped: list[Skipped] = list(skipped)


@dataclass(frozen=True, slots=True)
class Abandoned:
    """An at_most_once occurrence whose worker was lost mid-call: it is never run again."""

    key: str
    tenant: str | None
    scheduled_for: datetime
    owner: str | None
    attempts: int
    job: str


@dataclass(frozen=True, slots=True)
class Failure:
    """What booking a failed attempt did: ``booked`` is False when the lease had been taken over.

    ``paused``: its schedule is paused now; ``paused_now``: this booking paused it (pause_after
    reached; it was not paused before).
    """

    booked: bool
    final: bool
    consecutive_failures: int = 0
    paused: bool = False
    paused_now: bool = False


@dataclass(frozen=True, slots=True)
class Lease:
    """A named lease, held by ``owner`` until ``expires_at``.

    ``token`` is strictly greater than the token of every earlier acquisition of the same name, so
    a write carrying it can be told apart from one by an earlier holder whose lease ran out.
    """

    name: str
    owner: str
    token: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Sweep:
    """One housekeeping pass by ``worker``: how many occurrences it pruned, reclaimed from lost
    workers and abandoned, and the error that stopped it (None when it finished its work)."""

    worker: str
    started_at: datetime
    finished_at: datetime
    pruned: int
    reclaimed: int
    abandoned: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class WorkerBeat:
    """A worker process as it last said (its heartbeat, about once a minute): since when it runs,
    its oncely version and the fingerprint of the code it runs (`CodeVersion.fingerprint`)."""

    name: str
    started_at: datetime
    heartbeat_at: datetime
    oncely_version: str
    code_version: str


@dataclass(frozen=True, slots=True)
class Reclaimed:
    """A running occurrence whose worker was lost (its lease expired), given back to run again
    (``retrying``) or, when that was its last attempt, recorded as ``failed``."""

    key: str
    tenant: str | None
    scheduled_for: datetime
    owner: str | None
    attempts: int
    status: Literal["retrying", "failed"]


@dataclass(frozen=True, slots=True)
class CodeVersion:
    """A set of code-declared schedules as some worker started with it, by ``fingerprint``:
    first and last seen (workers refresh ``last_seen_at`` while they run), and when its
    declarations were last applied to the schedules (None: never)."""

    fingerprint: str
    first_seen_at: datetime
    last_seen_at: datetime
    applied_at: datetime | None


@dataclass(frozen=True, slots=True)
class Action:
    """Something a person did to schedule (tenant, key) by hand, at ``at``: ``action`` is what
    (``trigger``, ``pause``, ``resume``, ``backfill``, ``retry``, ``release``), ``actor`` who,
    ``reason`` why (empty when not given) and ``detail`` what came of it."""

    at: datetime
    key: str
    tenant: str | None
    action: str
    actor: str
    reason: str = ""
    detail: str | None = None
