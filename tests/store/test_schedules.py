"""Store contract, schedules: one row per (tenant, key), upserts, pause, removal, tenants."""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from oncely import UnknownSchedule, cron, every, rrule
from oncely.errors import InvalidPayload
from oncely.store import Store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)
HOURLY = every(hours=1)
NEXT = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)


def save(store: Store, key: str = "digest", **changes: object) -> object:
    fields: dict[str, object] = {
        "tenant": None,
        "key": key,
        "job": "morning_digest",
        "origin": "code",
        "trigger": HOURLY,
        "payload": {"user": 42},
        "next_run_at": NEXT,
        "now": NOW,
    }
    fields.update(changes)
    return store.save_schedule(**fields)  # type: ignore[arg-type]


def test_a_saved_schedule_reads_back_equal(store: Store) -> None:
    trigger = rrule("FREQ=WEEKLY;BYDAY=MO", start=datetime(2026, 1, 5, 9), tz="Europe/Paris")
    saved = save(store, trigger=trigger, payload={"user": 42, "tags": ["a", "ü"]})
    read = store.get_schedule(None, "digest")
    assert read == saved
    assert read.trigger == trigger
    assert read.next_run_at == NEXT
    assert read.next_run_at.tzinfo == UTC
    assert (read.status, read.paused, read.tenant, read.origin) == ("active", False, None, "code")
    assert read.payload == {"user": 42, "tags": ["a", "ü"]}
    assert read.created_at == read.updated_at == NOW


def test_saving_the_same_key_again_replaces_it_in_place(store: Store) -> None:
    save(store)
    store.set_paused(None, "digest", True, NOW)
    replaced = save(store, trigger=cron("0 9 * * *", "Europe/Berlin"), payload=None, now=LATER)
    assert replaced.trigger == cron("0 9 * * *", "Europe/Berlin")
    assert replaced.payload is None
    assert replaced.paused  # a code change does not resume what an operator paused
    assert (replaced.created_at, replaced.updated_at) == (NOW, LATER)
    assert [s.key for s in store.list_schedules(None)] == ["digest"]


def test_a_schedule_with_no_next_run_is_ended(store: Store) -> None:
    ended = save(store, next_run_at=None)
    assert (ended.status, ended.next_run_at) == ("ended", None)


def test_pause_resume_and_remove(store: Store) -> None:
    save(store)
    assert store.set_paused(None, "digest", True, LATER).paused
    assert not store.set_paused(None, "digest", False, LATER).paused
    removed = store.remove_schedule(None, "digest", LATER)
    assert (removed.status, removed.next_run_at) == ("removed", None)
    assert store.list_schedules(None) == []
    with pytest.raises(UnknownSchedule, match="'digest'"):
        store.get_schedule(None, "digest")
    with pytest.raises(UnknownSchedule):
        store.set_paused(None, "digest", True, LATER)
    with pytest.raises(UnknownSchedule):
        store.remove_schedule(None, "digest", LATER)
    # saving the key again brings it back
    assert save(store, now=LATER).status == "active"


def test_unknown_keys_raise_an_oncely_lookup_error(store: Store) -> None:
    with pytest.raises(UnknownSchedule, match=r"app\.schedules") as caught:
        store.get_schedule("acme", "missing")
    assert isinstance(caught.value, LookupError)
    assert "tenant 'acme'" in str(caught.value)


def test_tenants_are_isolated(store: Store) -> None:
    # Lesson 14: a schedule written under one tenant is invisible when another is bound.
    save(store, tenant="acme", key="remind:1", payload={"secret": "acme"})
    save(store, tenant="globex", key="remind:1", payload={"secret": "globex"})
    save(store, tenant=None, key="remind:1", payload={"secret": "none"})
    assert store.get_schedule("acme", "remind:1").payload == {"secret": "acme"}
    assert store.get_schedule("globex", "remind:1").payload == {"secret": "globex"}
    assert store.get_schedule(None, "remind:1").payload == {"secret": "none"}
    assert [s.payload for s in store.list_schedules("acme")] == [{"secret": "acme"}]
    with pytest.raises(UnknownSchedule):
        store.get_schedule("initech", "remind:1")
    store.set_paused("acme", "remind:1", True, LATER)
    assert not store.get_schedule("globex", "remind:1").paused
    store.remove_schedule("globex", "remind:1", LATER)
    assert store.get_schedule("acme", "remind:1").status == "active"
    everyone = store.list_schedules(None, all_tenants=True)
    assert [(s.tenant, s.key) for s in everyone] == [(None, "remind:1"), ("acme", "remind:1")]


@pytest.mark.parametrize("payload", [object(), {"x": math.nan}, {1: {2, 3}}, b"bytes"])
def test_a_payload_that_is_not_json_is_refused_and_nothing_is_written(
    store: Store, payload: object
) -> None:
    save(store, payload={"kept": True})
    with pytest.raises(InvalidPayload, match="JSON"):
        save(store, payload=payload, now=LATER)
    assert store.get_schedule(None, "digest").payload == {"kept": True}


def test_a_stored_trigger_that_no_longer_reads_marks_only_its_schedule_invalid(
    store: Store,
) -> None:
    save(store, key="good")
    bad = save(store, key="bad")
    assert bad.trigger is not None
    _corrupt_trigger(store, "bad")
    listed = {s.key: s for s in store.list_schedules(None)}
    assert listed["good"].status == "active"
    assert listed["bad"].status == "invalid"
    assert listed["bad"].trigger is None
    assert listed["bad"].next_run_at is None
    assert listed["bad"].status_reason
    assert store.get_schedule(None, "bad").status == "invalid"


def test_marking_schedules_invalid_returns_those_this_call_stopped(store: Store) -> None:
    # Two workers that meet the same bad rule at once both mark it; only the first may log it.
    save(store, key="bad")
    save(store, key="worse", tenant="acme")
    for key in ("bad", "worse"):
        _corrupt_trigger(store, key)
    both = [(None, "bad", "invalid: FREQ=NEVERLY"), ("acme", "worse", "invalid: FREQ=NEVERLY")]
    assert store.mark_invalid(both, LATER) == [(None, "bad"), ("acme", "worse")]
    assert store.mark_invalid(both, LATER) == []
    assert store.mark_invalid([(None, "missing", "invalid")], LATER) == []
    assert store.mark_invalid([], LATER) == []
    assert [o.status for o in store.history(None, key="bad")] == ["invalid"]
    assert [o.reason for o in store.history("acme", key="worse")] == ["invalid: FREQ=NEVERLY"]


def test_due_schedules_leave_the_payload_behind(store: Store) -> None:
    # Materialising never needs it: 1 MB payloads read again with every batch made workers late.
    save(store, payload={"blob": "x" * 100_000})
    due = store.due_schedules(NEXT, ["morning_digest"], 10)
    assert [(s.key, s.payload) for s in due] == [("digest", None)]
    assert store.get_schedule(None, "digest").payload == {"blob": "x" * 100_000}


def test_two_workers_marking_the_same_bad_rules_in_opposite_orders_stop_each_once(
    store: Store,
) -> None:
    # Both lock in one order whatever order they were given: no deadlock, and the second to come
    # finds each schedule already stopped, so that each is logged (and recorded) once.
    keys = [f"bad-{n:03}" for n in range(120)]
    for key in keys:
        save(store, key=key)
        _corrupt_trigger(store, key)
    ask = [(None, key, "invalid: FREQ=NEVERLY") for key in keys]
    start = threading.Barrier(2)

    def mark(order: list[tuple[str | None, str, str]]) -> list[tuple[str | None, str]]:
        start.wait()
        return store.mark_invalid(order, LATER)

    with ThreadPoolExecutor(2) as pool:
        stopped = list(pool.map(mark, [ask, ask[::-1]]))
    assert sorted(stopped[0] + stopped[1]) == [(None, key) for key in keys]
    assert {s.status for s in store.list_schedules(None)} == {"invalid"}
    assert len(store.history(None, status="invalid", limit=500)) == len(keys)


def _corrupt_trigger(store: Store, key: str) -> None:
    """Write a rule no version of oncely accepts straight into the row, as bad data would be."""
    spec = '{"kind": "rrule", "v": 1, "rule": "FREQ=NEVERLY"}'
    if store.dialect == "sqlite":
        import sqlite3

        with sqlite3.connect(store.path) as connection:  # type: ignore[attr-defined]
            connection.execute(
                "UPDATE oncely_schedules SET trigger_spec = ? WHERE key = ?", (spec, key)
            )
        connection.close()
    else:
        import psycopg

        with psycopg.connect(store.conninfo) as connection:  # type: ignore[attr-defined]
            connection.execute(
                "UPDATE oncely_schedules SET trigger_spec = %s::jsonb WHERE key = %s", (spec, key)
            )
