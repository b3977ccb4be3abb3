"""Why a schedule did or did not fire: its state, what comes next, what happened, who holds it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from oncely.engine.describe import (
    ago,
    instance_document,
    is_overdue,
    iso_utc,
    occurrence_document,
    printable,
    schedule_document,
    trigger_text,
)
from oncely.model import Occurrence, Schedule
from oncely.recurrence import Instance, describe_dst


@dataclass(frozen=True, slots=True)
class Explanation:
    """The answer to "why did (or didn't) it fire?" for one schedule, at one moment.

    ``upcoming`` are the next occurrences the trigger gives (with DST notes), empty when the
    schedule cannot fire (paused, ended, invalid). ``recent`` is its history, newest first, with
    each skip's reason. ``running`` are its occurrences under a lease now: the lease holder is
    ``worker`` and the lease ends at ``lease_expires_at``. ``worker_seen_at`` is when a worker
    last said it runs (None: never), which tells an overdue next run's cause.
    """

    schedule: Schedule
    now: datetime
    upcoming: list[Instance]
    recent: list[Occurrence]
    running: list[Occurrence]
    worker_seen_at: datetime | None = None

    @property
    def overdue(self) -> bool:
        """Whether its next run is past and no worker has taken it (see `is_overdue`)."""
        return is_overdue(self.schedule, self.now)

    @property
    def state(self) -> str:
        s = self.schedule
        if s.status == "invalid":
            return f"stopped: its stored trigger no longer reads ({s.status_reason})"
        if s.status == "ended":
            return "ended: its trigger has no further occurrence"
        if s.paused and s.paused_until is not None:
            return f"paused until {iso_utc(s.paused_until)}, then it resumes by itself"
        if s.paused:
            return f"paused{f' ({s.status_reason})' if s.status_reason else ''}; resume() starts it"
        if self.overdue and s.next_run_at is not None:
            return f"active, but overdue since {iso_utc(s.next_run_at)}: no worker has taken it"
        return "active"

    @property
    def worker_state(self) -> str:
        """When a worker was last seen, in words."""
        if self.worker_seen_at is None:
            return "no worker has been seen"
        seen = self.worker_seen_at
        return f"worker last seen {iso_utc(seen)} ({ago(seen, self.now)})"

    def document(self) -> dict[str, Any]:
        """The explanation for JSON: what `str` says, as fields."""
        s = self.schedule
        return {
            **schedule_document(s, self.now),
            "state": self.state,
            "now": self.now,
            "worker_seen_at": self.worker_seen_at,
            "upcoming": [instance_document(i) for i in self.upcoming],
            "running": [occurrence_document(o) for o in self.running],
            "recent": [occurrence_document(o) for o in self.recent],
        }

    def __str__(self) -> str:
        s = self.schedule
        tenant = f" (tenant {printable(repr(s.tenant))})" if s.tenant is not None else ""
        head = f"{printable(s.key)}{tenant}: job {s.job}, {trigger_text(s.trigger)}, {self.state}"
        lines = [printable(head), f"workers: {self.worker_state}"]
        if self.upcoming:
            lines.append("next:")
            for instance in self.upcoming:
                local = instance.local.strftime("%a %Y-%m-%d %H:%M:%S %Z")
                described = describe_dst(instance)
                note = f"  {described}" if described else ""
                lines.append(f"  {local}  ({instance.at.isoformat()}){note}")
        for occurrence in self.running:
            lines.append(
                f"running: {occurrence.scheduled_for.isoformat()} attempt {occurrence.attempts} "
                f"held by {printable(occurrence.worker or '?')} "
                f"until {_iso(occurrence.lease_expires_at)}"
            )
        lines.append("recent:" if self.recent else "recent: nothing recorded yet")
        for o in self.recent:
            why = printable(o.reason or (o.error.strip().splitlines()[-1] if o.error else ""))
            retry = f" retry at {o.retry_at.isoformat()}" if o.retry_at else ""
            lines.append(
                f"  {o.scheduled_for.isoformat()}  {o.status:<9} attempts {o.attempts}"
                + (f"  {printable(o.worker)}" if o.worker else "")
                + f"{retry}{f'  {why}' if why else ''}"
            )
        return "\n".join(lines)


def _iso(value: datetime | None) -> str:
    return "?" if value is None else value.isoformat()
