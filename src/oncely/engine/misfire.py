"""Which due occurrences of a schedule run, and which are recorded as skipped (DESIGN lesson 8).

After downtime or an edit oncely never replays weeks of the past. ``skip`` (the default) runs the
newest missed occurrence only if it is within ``grace``; ``latest`` runs the newest whatever its
age; ``all`` runs every missed one, the newest ``misfire_limit`` at most. Every occurrence that
does not run is still recorded, as skipped with its reason, so "why didn't it fire?" has an answer.
A one-off timer (``at``) always runs, late or not: it has no series to replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from oncely.engine.job import Job
from oncely.model import Planned
from oncely.recurrence import Instance, Trigger


@dataclass(frozen=True, slots=True)
class Plan:
    """The occurrences to record for a schedule now, and its next run after them."""

    planned: list[Planned]
    next_run_at: datetime | None


def plan(
    trigger: Trigger,
    next_run_at: datetime,
    job: Job,
    now: datetime,
    ahead_to: datetime | None = None,
) -> Plan:
    """Decide what the occurrences due between ``next_run_at`` and ``now`` (inclusive) become,
    and, with ``ahead_to``, plan the ones after ``now`` until then as pending (materialised
    ahead: they are not late, whatever the misfire policy says of the past ones)."""
    until = now if ahead_to is None else max(now, ahead_to)
    limit = job.misfire_limit
    due: list[Instance] = []
    following: Instance | None = None
    for instance in trigger.instances_from(next_run_at):
        if instance.at > until:
            following = instance
            break
        due.append(instance)
        if len(due) > limit:
            break
    unlisted = ""
    if len(due) > limit:
        # Too many to list: keep the newest `limit` and say that earlier ones went unrecorded.
        due = _newest(trigger, next_run_at, until, limit)
        unlisted = f"; earlier missed occurrences since {next_run_at.isoformat()} are not listed"
        following = trigger.next_instance_after(until)
    next_at = following.at if following is not None else None
    if not due:
        return Plan([], next_at)
    # Judged by the real now: planned "ahead" to a later time, an occurrence due a moment ago
    # read as half an hour late and was skipped beyond grace.
    past = [instance for instance in due if instance.at <= now]
    ahead = [Planned(instance) for instance in due if instance.at > now]
    planned = (_decide(past, trigger, job, now) if past else []) + ahead
    if unlisted:
        first = planned[0]
        planned[0] = Planned(first.instance, first.status, (first.reason or "") + unlisted)
    return Plan(planned, next_at)


def _decide(due: list[Instance], trigger: Trigger, job: Job, now: datetime) -> list[Planned]:
    if trigger.kind == "at" or job.misfire == "all":
        return [Planned(instance) for instance in due]
    newest = due[-1]
    late = now - newest.at
    if job.misfire == "skip" and late > job.grace:
        reason = f"misfire: {age(late)} late, beyond grace {age(job.grace)} (misfire='skip')"
        return [Planned(instance, "skipped", reason) for instance in due]
    superseded = superseded_by(newest.at, job)
    return [Planned(instance, "skipped", superseded) for instance in due[:-1]] + [Planned(newest)]


def superseded_by(newest: datetime, job: Job) -> str:
    """The reason of a missed occurrence that the newer one at ``newest`` replaces. It names the
    occurrence, not a run: that one may yet be skipped in its turn."""
    return f"misfire: superseded by the newer occurrence at {newest.isoformat()} " + (
        f"(misfire={job.misfire!r})"
    )


def _newest(trigger: Trigger, first: datetime, now: datetime, limit: int) -> list[Instance]:
    """The newest ``limit`` instances in [first, now], found by widening a window back from now."""
    window = timedelta(minutes=1)
    while True:
        start = max(first, now - window)
        found = list(trigger.instances_within(start, now))
        if len(found) >= limit or start == first:
            return found[-limit:]
        window *= 4


def age(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours else []
    parts += [f"{minutes}m"] if minutes else []
    parts += [f"{seconds}s"] if seconds or not parts else []
    return "".join(parts)
