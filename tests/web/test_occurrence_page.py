"""An occurrence's page and its /api twin: who holds its lease and with which fence, its
idempotency key, its attempts, and its error whole, traceback included."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
from _web_support import build, call, claim

import oncely
from oncely.web import dashboard


@pytest.fixture
def app(sqlite_url: str) -> Iterator[oncely.App]:
    made, clock = build(sqlite_url)
    clock.now += timedelta(minutes=1)  # past the last tick: a trigger adds an occurrence
    yield made
    made.close()


def both(app: oncely.App, key: str, at: str) -> tuple[str, Any]:
    path = f"/schedules/{quote(key, safe='')}/occurrences/{quote(at, safe='')}"
    page = call(dashboard(app), "GET", path)
    twin = call(dashboard(app), "GET", "/api" + path)
    assert (page.status, twin.status) == (200, 200), page.body
    return page.body, json.loads(twin.body)


def test_a_running_occurrence_shows_its_lease_holder_and_fence(app: oncely.App) -> None:
    claimed = claim(app, "beat", "web-7#4242")
    page, twin = both(app, "beat", claimed.scheduled_for.isoformat())
    assert (twin["worker"], twin["status"]) == ("web-7#4242", "running")
    assert twin["fence"] == claimed.fence
    assert twin["lease_expires_at"] == claimed.lease_expires_at.isoformat()
    assert "<dt>fence</dt><dd>" + str(claimed.fence) + "</dd>" in page
    assert "web-7#4242" in page
    assert twin["idempotency_key"] in page


def test_a_failed_occurrence_shows_its_attempts_and_whole_traceback(app: oncely.App) -> None:
    failed = app.history("sync", status="failed", limit=1)[0]
    page, twin = both(app, "sync", failed.scheduled_for.isoformat())
    assert twin["attempts"] == failed.attempts
    assert twin["error"].startswith("Traceback (most recent call last)")
    assert twin["error"].rstrip().endswith("RuntimeError: upstream answered 503")
    assert "Traceback (most recent call last)" in page
    assert isinstance(twin["fence"], int)


def test_every_attempt_shows_its_worker_fence_outcome_and_error(sqlite_url: str) -> None:
    app, clock = build(sqlite_url)
    try:

        @app.job()
        def shaky(run: oncely.Run) -> None:
            if run.attempt == 2:
                raise RuntimeError("attempt 2 met a 503")

        app.defer(shaky, at=clock.now, key="shaky")
        (lost,) = app.store.claim_due(
            owner="web-9#999", lease=timedelta(minutes=5), limit=1, now=clock.now,
            jobs=["shaky"], reclaim=["shaky"], serial=[],
        )  # fmt: skip
        clock.now += timedelta(minutes=6)
        app.tick()  # takes the lost attempt over; attempt 2 fails
        clock.now += timedelta(hours=1)
        app.tick()  # attempt 3 succeeds
        (row,) = app.history("shaky")
        page, twin = both(app, "shaky", row.scheduled_for.isoformat())
        details = twin["attempt_details"]
        assert [(a["number"], a["outcome"], a["worker"]) for a in details] == [
            (1, "lost", "web-9#999"),
            (2, "failed", row.worker),
            (3, "succeeded", row.worker),
        ]
        assert details[0]["fence"] == lost.fence
        assert twin["attempts_not_kept"] == 0
        for attempt in details:
            assert f'<tr id="attempt-{attempt["number"]}">' in page
            assert f"<td>{attempt['fence']}</td>" in page
        assert "web-9#999 was lost during attempt 1 (lease expired)" in page
        assert details[1]["error"].startswith("Traceback (most recent call last)")
        assert "RuntimeError: attempt 2 met a 503" in page
    finally:
        app.close()


def test_attempts_booked_before_they_were_kept_are_counted_as_not_kept(app: oncely.App) -> None:
    failed = app.history("sync", status="failed", limit=1)[0]
    with app.store.transaction() as connection:
        connection.execute(
            "DELETE FROM oncely_attempts"
        )  # as a version before migration 10 left it
        connection.execute("UPDATE oncely_occurrences SET attempts = 3 WHERE status = 'failed'")
    page, twin = both(app, "sync", failed.scheduled_for.isoformat())
    assert [a["number"] for a in twin["attempt_details"]] == [3]
    assert twin["attempts_not_kept"] == 2
    assert "2 earlier attempts not kept" in page
