"""PostgreSQL: a claim and a save of the same schedule never deadlock, whatever the interleaving.

A claim locks occurrence rows, then their schedules; `save_schedule` locks a schedule, then its
pending occurrences. The interleaving that deadlocked is forced here: the save starts while the
claim holds the occurrence row and has not yet reached the schedule.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import oncely
from oncely.store import PostgresStore
from oncely.testing import Clock

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _wait_for_a_lock_wait(url: str, what: str) -> None:
    """Return once some backend of this database waits for a row lock; fail after 10 s."""
    with psycopg.connect(url, autocommit=True) as watcher:
        for _ in range(200):
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            ).fetchone()
            if waiting is not None and waiting[0] > 0:
                return
            time.sleep(0.05)
    pytest.fail(f"{what} never waited for the claim's lock")


@pytest.mark.postgres
def test_a_claim_and_an_edit_of_its_schedule_never_deadlock(postgres_url: str) -> None:
    clock = Clock(NOW)
    app = oncely.App(postgres_url, clock=clock)
    ran: list[datetime] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(run.scheduled_for)

    app.defer(remind, at=NOW, key="remind:42")
    store = app.store
    assert isinstance(store, PostgresStore)
    errors: list[BaseException] = []
    original: Callable[..., Any] = store._candidates

    def edit() -> None:
        try:
            app.defer(remind, at=NOW + timedelta(hours=1), key="remind:42")
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    editor = threading.Thread(target=edit)

    def candidates_then_an_edit(connection: Any, name: str, *args: Any) -> Any:
        found = original(connection, name, *args)
        if name == "claim_ready" and found and not editor.is_alive() and not ran:
            editor.start()  # locks the schedule, then waits for the row this claim holds
            _wait_for_a_lock_wait(postgres_url, "the edit")
        return found

    store._candidates = candidates_then_an_edit  # type: ignore[method-assign]
    try:
        app.tick()
    finally:
        editor.join(timeout=30)
        store._candidates = original  # type: ignore[method-assign]
    assert errors == []
    assert not editor.is_alive()
    assert ran == []  # the one-off moved to 10:00 before 09:00 started
    assert [o.status for o in app.history(key="remind:42")] == ["pending", "skipped"]
    clock.set(NOW + timedelta(hours=1))
    app.tick()
    assert ran == [NOW + timedelta(hours=1)]
    app.close()
