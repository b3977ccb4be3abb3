"""Issue 21.1: payloads are bounded when written, and one stored payload that cannot be read
stops only its own occurrence, never a worker, a listing or another tenant's job."""

from __future__ import annotations

from typing import Any

import pytest

import oncely
from oncely.store import MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH
from oncely.testing import Clock


def nested(depth: int) -> Any:
    """A payload of ``depth`` lists, one inside the other."""
    payload: list[Any] = []
    inner = payload
    for _ in range(depth - 1):
        inner.append([])
        inner = inner[0]
    return payload


def store_payload(app: oncely.App, key: str, text: str) -> None:
    """Write ``text`` as schedule ``key``'s payload, past oncely's checks, as another release
    (or another Python, with more recursion room) could have."""
    marker = "?" if app.store.dialect == "sqlite" else "%s"
    cast = "" if app.store.dialect == "sqlite" else "::jsonb"
    with app.store.transaction() as connection:
        connection.execute(
            f"UPDATE oncely_schedules SET payload = {marker}{cast} WHERE key = {marker}",
            (text, key),
        )


def test_a_payload_nested_deeper_than_the_bound_is_refused(
    app: oncely.App, remind: oncely.Job
) -> None:
    app.schedule(remind, oncely.every(hours=1), key="deepest", payload=nested(MAX_PAYLOAD_DEPTH))
    with pytest.raises(oncely.InvalidPayload, match=f"deeper than {MAX_PAYLOAD_DEPTH}"):
        app.schedule(
            remind, oncely.every(hours=1), key="deeper", payload=nested(MAX_PAYLOAD_DEPTH + 1)
        )
    with pytest.raises(oncely.InvalidPayload, match="nested"):
        app.defer(remind, at=app.now(), key="deeper", payload={"a": nested(1300)})
    assert [s.key for s in app.schedules()] == ["deepest"]


def test_three_100_mb_payloads_are_refused(app: oncely.App, remind: oncely.Job) -> None:
    big = "x" * 100_000_000
    for n in range(3):
        with pytest.raises(oncely.InvalidPayload, match=f"at most {MAX_PAYLOAD_BYTES}"):
            app.defer(remind, at=app.now(), key=f"big:{n}", payload={"blob": big})
    with pytest.raises(oncely.InvalidPayload, match="bytes"):
        app.schedule(remind, oncely.every(hours=1), key="wide", payload=["é" * 1000] * 3000)
    app.defer(remind, at=app.now(), key="fits", payload="x" * (MAX_PAYLOAD_BYTES - 2))
    assert [s.key for s in app.schedules()] == ["fits"]


@pytest.mark.parametrize("depth", [990, 1300])
def test_a_stored_payload_too_deep_to_read_stops_only_its_own_occurrence(
    app: oncely.App, clock: Clock, depth: int
) -> None:
    ran: list[tuple[str | None, str]] = []

    @app.job()
    def bill(run: oncely.Run) -> None:
        ran.append((run.tenant, run.key))

    app.for_tenant("acme").schedule(bill, oncely.every(minutes=1), key="deep", payload=[1])
    app.for_tenant("globex").schedule(bill, oncely.every(minutes=1), key="fine", payload=[2])
    store_payload(app, "deep", "[" * depth + "]" * depth)
    # Read by a process with less recursion room than the writer's, as on Python 3.11.
    clock.advance(minutes=1)
    app.tick()
    assert ran == [("globex", "fine")]
    (failed,) = app.for_tenant("acme").history(key="deep")
    assert failed.status == "failed", failed
    assert "payload" in (failed.error or ""), failed.error
    listed = {s.key: s for s in app.schedules()}
    assert listed["deep"].status == "invalid"
    assert "payload" in (listed["deep"].status_reason or "")
    assert listed["deep"].payload is None
    assert listed["fine"].payload == [2]
    assert "payload" in str(app.for_tenant("acme").explain("deep"))
    assert {o.key for o in app.history()} == {"deep", "fine"}


def test_a_stored_payload_that_is_not_json_stops_only_its_own_occurrence(
    sqlite_url: str, clock: Clock
) -> None:
    # PostgreSQL's jsonb holds only JSON; SQLite's text column holds anything.
    app = oncely.App(sqlite_url, clock=clock)
    ran: list[str] = []

    @app.job()
    def bill(run: oncely.Run) -> None:
        ran.append(run.key)

    app.schedule(bill, oncely.every(minutes=1), key="torn", payload={"a": 1})
    app.schedule(bill, oncely.every(minutes=1), key="fine", payload={"a": 2})
    store_payload(app, "torn", '{"a": ')
    clock.advance(minutes=1)
    app.tick()
    assert ran == ["fine"]
    (failed,) = app.history(key="torn")
    assert (failed.status, "payload" in (failed.error or "")) == ("failed", True), failed
    assert {s.key: s.status for s in app.schedules()} == {"torn": "invalid", "fine": "active"}
    app.close()
