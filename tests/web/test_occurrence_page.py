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
