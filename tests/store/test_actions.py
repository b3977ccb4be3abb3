"""Store contract, actions: what a person did to a schedule by hand, who, when and why, kept
beside the schedule's history and read back newest first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from oncely.model import Action, Planned
from oncely.recurrence import at
from oncely.store import Store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def action(key: str, at: datetime, tenant: str | None = None, **fields: str) -> Action:
    return Action(
        at=at,
        key=key,
        tenant=tenant,
        action=fields.get("action", "pause"),
        actor=fields.get("actor", "ada@example.com"),
        reason=fields.get("reason", "vendor outage"),
        detail=fields.get("detail"),
    )


def test_actions_are_recorded_and_read_newest_first_per_schedule(store: Store) -> None:
    assert store.actions(None, "report") == []
    first = action("report", NOW - timedelta(minutes=2))
    second = action("report", NOW, action="resume", reason="", detail="next run 13:00")
    other_key = action("export", NOW)
    other_tenant = action("report", NOW, tenant="acme")
    for recorded in (first, second, other_key, other_tenant):
        store.record_action(recorded)
    assert store.actions(None, "report") == [second, first]
    assert store.actions("acme", "report") == [other_tenant]
    assert store.actions(None, "report", limit=1) == [second]
    # every key of no tenant; at the same time, the one recorded later first
    assert store.actions(None, None) == [other_key, second, first]


def test_retry_failed_gives_a_failed_occurrence_one_more_attempt_once(store: Store) -> None:
    when = NOW - timedelta(minutes=5)
    instance = at(when).next_instance_after(when - timedelta(microseconds=1))
    assert instance is not None
    store.save_schedule(
        tenant=None, key="report", job="report", origin="api", trigger=at(when), payload=None,
        next_run_at=None, now=NOW, occurrences=[Planned(instance, origin="defer")],
    )  # fmt: skip
    assert not store.retry_failed(None, "report", when, NOW)  # pending: not failed, left alone
    (claim,) = store.claim_due(
        owner="host#1", lease=timedelta(minutes=1), limit=10, now=NOW, jobs=["report"],
        reclaim=[], serial=[],
    )  # fmt: skip
    store.book_failure(claim, NOW, error="boom", retry_at=None, pause_after=None)
    assert store.history(None, key="report")[0].status == "failed"
    later = NOW + timedelta(minutes=1)
    assert store.retry_failed(None, "report", when, later)
    (retried,) = store.history(None, key="report")
    assert retried.status == "retrying"
    assert retried.retry_at == later
    assert not store.retry_failed(None, "report", when, later)  # no longer failed
    assert not store.retry_failed(None, "report", NOW, later)  # no such occurrence
    assert not store.retry_failed("acme", "report", when, later)  # nor in another tenant
