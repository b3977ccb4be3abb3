"""Why a schedule did or did not fire: its state, what comes next, what happened, who holds it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from oncely.model import Occurrence, Schedule
from oncely.recurrence import Instance, describe_dst


@dataclass(frozen=True, slots=True)
class Explanation:
    """The answer to "why did (or didn't) it fire?" for one schedule, at one moment.

    ``upcoming`` are the next occurrences the trigger gives (with DST notes), empty when the
    schedule cannot fire (paused, ended, invalid). ``recent`` is its history, newest first, with
    each skip's reason. ``running`` are its occurrences under a lease now: the lease holder is
    ``worker`` and the lease ends at ``lease_expires_at``.
    """

    schedule: Schedule
    now: datetime
    upcoming: list[Instance]
    recent: list[Occurrence]
    running: list[Occurrence]

    @property
    def state(self) -> str:
        s = self.schedule
        if s.status == "invalid":
            return f"stopped: its stored trigger no longer reads ({s.status_reason})"
        if s.status == "ended":
            return "ended: its trigger has no further occurrence"
        if s.paused:
            return f"paused{f' ({s.status_reason})' if s.status_reason else ''}; resume() starts it"
        return "active"

    def __str__(self) -> str:
        s = self.schedule
        tenant = f" (tenant {s.tenant!r})" if s.tenant is not None else ""
        lines = [f"{s.key}{tenant}: job {s.job}, {s.trigger!r}, {self.state}"]
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
                f"held by {occurrence.worker} until {_iso(occurrence.lease_expires_at)}"
            )
        lines.append("recent:" if self.recent else "recent: nothing recorded yet")
        for o in self.recent:
            why = o.reason or (o.error.strip().splitlines()[-1] if o.error else "")
            retry = f" retry at {o.retry_at.isoformat()}" if o.retry_at else ""
            lines.append(
                f"  {o.scheduled_for.isoformat()}  {o.status:<9} attempts {o.attempts}"
                f"{f'  {o.worker}' if o.worker else ''}{retry}{f'  {why}' if why else ''}"
            )
        return "\n".join(lines)


def _iso(value: datetime | None) -> str:
    return "?" if value is None else value.isoformat()
