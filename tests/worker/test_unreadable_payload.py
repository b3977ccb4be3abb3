"""Issue 21.1 in the long-running loops: a stored payload too deep to read fails its own
occurrence, and the worker and the embedded thread keep serving every other tenant."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from _serving import eventually, serving

import oncely


def _status(app: oncely.App, key: str) -> str | None:
    found = app.history(key=key, limit=1)
    return found[0].status if found else None


@contextmanager
def _embedded(app: oncely.App) -> Any:
    app.start()
    try:
        yield
    finally:
        app.stop(timeout=10)


def _embedded_loops() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "oncely-worker" and t.is_alive()]


@pytest.mark.parametrize("loop", ["worker", "embedded"])
def test_a_stored_payload_too_deep_to_read_stops_neither_worker_nor_embedded_thread(
    url: str, loop: str
) -> None:
    app = oncely.App(url)
    ran: list[str | None] = []

    @app.job()
    def bill(run: oncely.Run) -> None:
        ran.append(run.tenant)

    now = datetime.now(UTC)
    app.for_tenant("acme").defer(bill, at=now, key="deep", payload=[1])
    app.for_tenant("globex").defer(bill, at=now, key="fine", payload=[2])
    marker = "?" if app.store.dialect == "sqlite" else "%s"
    cast = "" if app.store.dialect == "sqlite" else "::jsonb"
    with app.store.transaction() as connection:
        connection.execute(
            f"UPDATE oncely_schedules SET payload = {marker}{cast} WHERE key = {marker}",
            ("[" * 1300 + "]" * 1300, "deep"),
        )
    # RecursionError ended `oncely run` at start, and the embedded thread, on Python 3.11.
    running: Callable[[oncely.App], AbstractContextManager[Any]] = (
        serving if loop == "worker" else _embedded
    )
    with running(app):
        eventually(lambda: _status(app, "fine") == "succeeded", what="globex's job to run")
        eventually(lambda: _status(app, "deep") == "failed", what="acme's job to fail")
        if loop == "embedded":
            assert _embedded_loops(), "the embedded loop's thread ended"
    assert ran == ["globex"]
    (failed,) = app.history(key="deep")
    assert "payload" in (failed.error or ""), failed.error
    app.close()
