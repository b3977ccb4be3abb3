"""A running worker keeps its row (heartbeat, versions) and deletes it when it stops; a sweep
deletes the row of a worker killed without stopping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from _serving import eventually, serving

import oncely
from oncely.engine import worker_id
from oncely.engine.reconcile import fingerprint
from oncely.model import WorkerBeat
from oncely.version import oncely_version


def test_a_worker_beats_from_its_start_and_forgets_its_row_when_it_stops(url: str) -> None:
    app = oncely.App(url)

    @app.job(oncely.every(hours=1))
    def hourly(run: oncely.Run) -> None:
        pass

    before = datetime.now(UTC)
    with serving(app):
        eventually(lambda: app.store.workers() != [], what="the worker's heartbeat")
        (row,) = app.store.workers()
        assert (row.name, row.oncely_version) == (worker_id(), oncely_version())
        assert row.code_version == fingerprint(app.jobs)
        assert before - timedelta(seconds=1) <= row.started_at <= row.heartbeat_at
    assert app.store.workers() == []
    app.close()


def test_housekeeping_forgets_a_worker_silent_for_an_hour(url: str) -> None:
    app = oncely.App(url)
    app.job(name="report")(lambda run: None)
    now = datetime.now(UTC)
    app.store.beat(
        WorkerBeat("killed#1", now - timedelta(hours=3), now - timedelta(hours=2), "x", "f")
    )
    app.store.beat(WorkerBeat("quiet#2", now, now - timedelta(minutes=50), "x", "f"))
    with serving(app):
        eventually(lambda: len(app.store.sweeps()) == 1, what="a housekeeping sweep")
        # The sweep comes before the worker's first heartbeat in its turn: its own row may not
        # be there yet.
        assert {w.name for w in app.store.workers()} - {worker_id()} == {"quiet#2"}
    app.close()
