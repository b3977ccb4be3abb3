"""Live pages: on PostgreSQL the dashboard pushes the store's change notices to open pages as
server-sent events; on SQLite, which has none, it says so and pages poll."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from _web_support import build, call, claim, served

import oncely
from oncely.web import dashboard


@pytest.fixture
def pg_app(postgres_url: str) -> Iterator[oncely.App]:
    app, _ = build(postgres_url)
    yield app
    app.close()


def test_a_change_in_the_store_is_pushed_as_an_event_on_postgresql(pg_app: oncely.App) -> None:
    asgi = dashboard(pg_app)
    page = call(asgi, "GET", "/schedules/beat")
    assert '<meta name="oncely-live" content="sse">' in page.body
    with served(asgi) as base:
        stream = urllib.request.urlopen(base + "/events", timeout=10)
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        assert stream.readline() == b"retry: 3000\n"
        assert stream.readline() == b"\n"
        received: list[bytes] = []

        def read() -> None:
            received.append(stream.readline())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(0.5)  # the stream is registered before the change is made
        assert received == []  # nothing is sent while nothing changes
        assert pg_app.trigger("digest") == 1  # made due now: the store NOTIFYs
        reader.join(timeout=10)
        assert received == [b"event: change\n"]
        stream.close()


def test_an_outcome_booked_by_a_worker_is_pushed_as_an_event(pg_app: oncely.App) -> None:
    claimed = claim(pg_app, "digest", "web-1#11")
    with served(dashboard(pg_app)) as base:
        stream = urllib.request.urlopen(base + "/events", timeout=10)
        assert stream.readline() == b"retry: 3000\n"
        assert stream.readline() == b"\n"
        received: list[bytes] = []
        reader = threading.Thread(target=lambda: received.append(stream.readline()), daemon=True)
        reader.start()
        time.sleep(0.5)  # the stream is registered before the outcome is booked
        assert received == []
        assert pg_app.store.book_success([claimed], pg_app.now()) == [claimed]
        reader.join(timeout=10)
        assert received == [b"event: change\n"]
        stream.close()


def test_sqlite_pages_poll_and_have_no_event_stream(sqlite_url: str) -> None:
    app, _ = build(sqlite_url)
    try:
        asgi = dashboard(app)
        assert '<meta name="oncely-live" content="poll">' in call(asgi, "GET", "/").body
        with served(asgi) as base, pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "/events", timeout=10)
        # The error holds the response and its socket: left to the garbage collector, that one
        # warned "unclosed socket" inside a later test (test_mounted_in_fastapi), failing it.
        with refused.value:
            assert refused.value.code == 404
    finally:
        app.close()
