"""The dialect-free half of claims and overlap: which candidates run, and in what order. Each
dialect fetches the rows and writes the result in its own transaction."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from oncely.model import Claim, Overlap, Planned
from oncely.store.records import tenant_of

OVERLAP_SKIP_REASON = "overlap: the previous occurrence had not finished (overlap='skip')"
# How many times one claim reads further candidates, each time past the schedules it has seen:
# a schedule's backlog (or a busy schedule's) takes one round, not the whole claim.
ROUNDS = 4


@dataclass(frozen=True, slots=True)
class Candidate:
    """An occurrence a claim query returned: not yet admitted."""

    occurrence_id: int
    schedule_id: int
    job: str
    reclaimed: bool
    # As the store reads it (the dialect's own type): with the id, it finds the row.
    scheduled_for: Any
    # Pending, from the schedule, and written before it came due (materialised ahead).
    ahead: bool = False
    run_after: datetime | None = None


def admit(
    candidates: Sequence[Candidate], serial: Collection[str], busy: Collection[int], limit: int
) -> list[Candidate]:
    """The candidates to claim, in order: for a serial job at most one per schedule, and none of
    a schedule in ``busy`` (one of its occurrences runs under a live lease)."""
    taken: set[int] = set()
    admitted: list[Candidate] = []
    for candidate in candidates:
        if candidate.job in serial:
            if candidate.schedule_id in busy or candidate.schedule_id in taken:
                continue
            taken.add(candidate.schedule_id)
        admitted.append(candidate)
        if len(admitted) == limit:
            break
    return admitted


def admit_in_rounds(
    limit: int,
    serial: Collection[str],
    read: Callable[[Sequence[int], bool], tuple[list[Candidate], bool]],
    settle: Callable[[list[Candidate], list[int]], tuple[list[Candidate], set[int]]],
) -> list[Candidate]:
    """The candidates to claim, read in rounds: each round reads the oldest candidates of the
    schedules no earlier round saw, until ``limit`` are admitted or nothing is left (`ROUNDS` at
    most). Without rounds, one schedule's backlog filled every claim's limit with rows that
    could not run while its head ran.

    ``read(seen, first)`` returns a round's candidates (the first round with expired leases
    too) and whether nothing is left after them. ``settle(candidates, fresh)`` does what the
    dialect must before admitting: lock the ``fresh`` schedules, skip what overlapped; it
    returns the candidates still to admit and the busy schedules.
    """
    admitted: list[Candidate] = []
    seen: set[int] = set()
    for round_ in range(ROUNDS):
        candidates, exhausted = read(sorted(seen), round_ == 0)
        if not candidates:
            break
        fresh = sorted({c.schedule_id for c in candidates} - seen)
        seen.update(fresh)
        kept, busy = settle(candidates, fresh)
        admitted += admit(kept, serial, busy, limit - len(admitted))
        if len(admitted) >= limit or exhausted:
            break
    return admitted


def claim(values: Mapping[str, Any], reclaimed: Collection[int]) -> Claim:
    """Map one ``select_claimed`` row, with Python types, to a `Claim`."""
    return Claim(
        occurrence_id=values["id"],
        schedule_id=values["schedule_id"],
        tenant=tenant_of(values["tenant"]),
        key=values["key"],
        job=values["job"],
        payload=values["payload"],
        scheduled_for=values["scheduled_for"].astimezone(UTC),
        run_after=values["run_after"].astimezone(UTC),
        attempt=values["attempts"],
        fence=values["fence"],
        owner=values["lease_owner"],
        lease_expires_at=values["lease_expires_at"].astimezone(UTC),
        origin=values["origin"],
        reclaimed=values["id"] in reclaimed,
        failure_streak=values["consecutive_failures"],
        held_until=_held_until(values),
    )


def _held_until(values: Mapping[str, Any]) -> datetime | None:
    finished = values.get("previous_finished_at")
    if finished is None:
        return None
    finished = finished.astimezone(UTC)
    return finished if finished > values["scheduled_for"].astimezone(UTC) else None


def with_overlap(
    planned: Sequence[Planned], overlap: Overlap, waiting: int, running: int, now: datetime
) -> list[Planned]:
    """``planned`` with its pending occurrences skipped where ``overlap`` forbids them.

    ``waiting`` and ``running`` count the stored occurrences still in progress: pending ones, and
    running or retrying ones. Only an occurrence that runs (or waits to retry) makes an overlap:
    a pending one that never started made the newest occurrence after downtime an "overlap" of
    a row nobody was running. Several occurrences planned together (a catch-up) are all kept,
    and the serial claim runs them one after another. An occurrence not due until after ``now``
    (materialised ahead) is not skipped under ``skip`` for one that runs now: that one may be
    over by then, and the claim judges it at its time (`OVERLAP_SKIP_REASON`).
    """
    if overlap == "allow" or running == 0:
        return list(planned)
    if overlap == "buffer_one" and waiting == 0:
        return list(planned)
    if overlap == "skip":
        reason = OVERLAP_SKIP_REASON
    else:
        reason = "overlap: one occurrence already waits for the running one (overlap='buffer_one')"
    return [
        replace(p, status="skipped", reason=reason)
        if p.status == "pending" and (overlap != "skip" or p.instance.at <= now)
        else p
        for p in planned
    ]


def overlapped(
    candidates: Sequence[Candidate], skip: Collection[str], busy: Collection[int], now: datetime
) -> list[Candidate]:
    """The candidates to book skipped for ``overlap='skip'``: materialised ahead of their time,
    due now, and their schedule runs another occurrence under a live lease."""
    return [
        c
        for c in candidates
        if c.job in skip and c.schedule_id in busy and c.ahead and c.run_after is not None
        and c.run_after <= now
    ]  # fmt: skip


def invalid_occurrence_params(
    schedule_id: int, tenant: str, at: datetime, reason: str, now: datetime
) -> dict[str, Any]:
    """``insert_occurrence`` parameters of the invalid row that records why a schedule stopped."""
    return {
        "schedule_id": schedule_id,
        "tenant": tenant,
        "scheduled_for": at,
        "local_wall": None,
        "fold": 0,
        "dst_note": None,
        "ordinal": None,
        "origin": "schedule",
        "status": "invalid",
        "reason": reason,
        "run_after": at,
        "now": now,
    }
