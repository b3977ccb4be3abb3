"""The dashboard's actions, each done through the app's own API and recorded as an `Action`:
who did it, why, and what came of it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from oncely.app import App
from oncely.engine import iso_utc
from oncely.errors import InvalidSchedule, OncelyError, UnknownSchedule
from oncely.model import Action
from oncely.web import views

_REASON_LIMIT = 500


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an action came to: a redirect to ``back`` (status 200), a page of ``preview`` (a
    backfill not yet confirmed), or an error ``status`` with its ``message``."""

    status: int = 200
    message: str = ""
    back: str | None = None
    preview: dict[str, Any] | None = None


def perform(
    app: App, who: str, action: str, target: str, tenant: str | None, fields: dict[str, str]
) -> Outcome:
    """Do ``action`` on schedule (or lock) ``target`` for ``who``, with ``fields`` from its form
    (``reason`` always; ``since``, ``until``, ``confirm`` for backfill; ``until``, optional,
    for pause; ``at`` for retry; ``token`` for release)."""
    reason = " ".join(fields.get("reason", "").split())[:_REASON_LIMIT]
    if not reason:
        return Outcome(400, "say why (the reason is kept in the schedule's history)")
    back = f"/schedules/{quote(target, safe='')}"
    try:
        if action == "release":
            return _release(app, who, target, reason, fields)
        source = app if tenant is None else app.for_tenant(tenant)
        now = app.now()
        detail: str
        if action == "trigger":
            added = source.trigger(target)
            detail = f"added an occurrence at {iso_utc(now)}" if added else "already due now"
        elif action == "pause":
            until = _moment(fields, "until") if fields.get("until", "").strip() else None
            source.pause(target, until=until)
            detail = "paused" if until is None else f"paused until {iso_utc(until)}"
        elif action == "resume":
            schedule = source.resume(target)
            nxt = schedule.next_run_at
            detail = "resumed" + (f"; next run {iso_utc(nxt)}" if nxt is not None else "")
        elif action == "backfill":
            since, until = _moment(fields, "since"), _moment(fields, "until")
            if fields.get("confirm") != "yes":
                preview = views.backfill_preview(app, tenant, target, since, until)
                return Outcome(preview={**preview, "reason": reason})
            added = source.backfill(target, since, until)
            detail = f"backfilled {iso_utc(since)} to {iso_utc(until)}: {added} created or re-armed"
        elif action == "retry":
            at = _moment(fields, "at")
            if not app.store.retry_failed(tenant, target, at, now):
                return Outcome(409, f"the occurrence at {at.isoformat()} is not failed (any more)")
            detail = f"retry of {at.isoformat()}"
            back += f"/occurrences/{quote(at.isoformat(), safe='')}"
        else:
            return Outcome(404, f"no action {action!r}")
        app.store.record_action(Action(now, target, tenant, action, who, reason, detail))
    except UnknownSchedule as exc:
        return Outcome(404, str(exc))
    except OncelyError as exc:
        return Outcome(400, str(exc))
    return Outcome(back=back)


def _release(app: App, who: str, name: str, reason: str, fields: dict[str, str]) -> Outcome:
    token = fields.get("token", "")
    lease = next(
        (lease for lease in app.store.leases() if lease.name == name and str(lease.token) == token),
        None,
    )
    if lease is None or not app.store.release_lease(lease):
        return Outcome(409, f"lock {name!r} is no longer held with token {token}; reload")
    now = app.now()
    detail = f"released lock held by {lease.owner} (token {lease.token}) until "
    detail += iso_utc(lease.expires_at)
    app.store.record_action(Action(now, name, None, "release", who, reason, detail))
    return Outcome(back="/locks")


def _moment(fields: dict[str, str], name: str) -> datetime:
    text = fields.get(name, "").strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidSchedule(f"{name} {text!r} is not a time; e.g. 2026-03-27T09:00") from exc
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
