"""Pause past the lease: a worker SIGSTOPped mid-handler until its lease expires, another worker
takes the occurrence over, then SIGCONT.

The paused attempt's completion is refused (history keeps the other worker's), and its fencing
token (``run.fence``), smaller than the new attempt's, lets the downstream write refuse it:
``UPDATE ... WHERE last_token < :token`` (docs/locks.md). Every-second schedules keep both
workers waking, as any busy fleet does: an idle worker looks for expired leases only when it
claims.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from _faults import (
    Effect,
    effects,
    fault_workers,
    history,
    prepare,
    schedule_every_second,
    scheduling_app,
)

from _processes import json_lines, terminate, wait_until

LEASE_S = 2
WORK_S = 1.0
KEY = "paused"


def _fenced(url: str, tmp_path: Path, note: str) -> list[Effect]:
    return [e for e in effects(url, tmp_path) if e.key == KEY and note in e.note]


def _downstream(url: str) -> tuple[int, int | None]:
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT last_token, writer FROM fault_downstream WHERE name = %s", (KEY,)
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def test_a_worker_paused_past_its_lease_is_refused_twice(
    postgres_url: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    prepare(postgres_url)
    schedule_every_second(postgres_url, 2, modes=["at_least_once"])
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("INSERT INTO fault_downstream (name, last_token) VALUES (%s, 0)", (KEY,))
    with fault_workers(postgres_url, tmp_path, lease_s=str(LEASE_S)) as group:
        group.start()
        group.start()
        wait_until(group.ready, timeout=30, what="the workers to start")
        app = scheduling_app(postgres_url)
        app.defer("fenced", at=datetime.now(UTC), key=KEY, payload={"work_s": WORK_S})
        app.close()
        wait_until(lambda: _fenced(postgres_url, tmp_path, "started"), 20, "the handler to start")
        (first,) = _fenced(postgres_url, tmp_path, "started")
        paused = next(p for p in group.started if p.pid == first.pid)
        os.kill(paused.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            wait_until(
                lambda: _downstream(postgres_url)[1] not in (None, paused.pid),
                timeout=30,
                what="another worker to take the occurrence over and write downstream",
            )
            wait_until(
                lambda: history(postgres_url)[(KEY, first.scheduled_for)].status == "succeeded",
                timeout=30,
                what="the other worker to book the occurrence",
            )
        finally:
            paused_s = time.monotonic() - stopped
            os.kill(paused.pid, signal.SIGCONT)
        wait_until(
            lambda: any(e.pid == paused.pid for e in _fenced(postgres_url, tmp_path, "wrote")),
            timeout=20,
            what="the paused handler to try its write",
        )
        wait_until(
            lambda: _refused(group.text_of(paused)), 20, "the paused worker's completion refused"
        )
        # The other worker stops first: two workers racing for two occurrences a second do not
        # share them evenly (under load one took all ten of a five-second window), and in CI the
        # paused one, alive and serving, won none for 20 s. Asked here: that it carries on.
        for process in group.alive():
            if process is not paused:
                assert terminate(process, within=20)[0] == 0, group.output()
        carried_on = time.time()
        try:
            wait_until(
                lambda: any(
                    e.pid == paused.pid and e.ran_at > carried_on
                    for e in effects(postgres_url, tmp_path)
                ),
                timeout=20,
                what="the paused worker to run occurrences again",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its log:\n{group.text_of(paused)[-6000:]}") from None
        assert terminate(paused, within=20)[0] == 0, group.output()
    row = history(postgres_url)[(KEY, first.scheduled_for)]
    writes = _fenced(postgres_url, tmp_path, "wrote")
    stale = next(e for e in writes if e.pid == paused.pid)
    fresh = next(e for e in writes if e.pid != paused.pid)
    token, writer = _downstream(postgres_url)
    by = "the other worker" if row.pid == fresh.pid else row.worker
    report(
        f"SIGSTOP for {paused_s:.1f} s, lease {LEASE_S} s: attempt {stale.attempt} paused, attempt "
        f"{fresh.attempt} on the other worker; downstream took fence {_fence(fresh)} and refused "
        f"the stale fence {_fence(stale)}; the stale completion refused; history: {row.status} "
        f"after {row.attempts} attempts, by {by}"
    )
    assert _fence(stale) < _fence(fresh)
    assert "applied=0 lease_lost=True" in stale.note, stale
    assert "applied=1" in fresh.note, fresh
    assert (token, writer) == (_fence(fresh), fresh.pid)
    assert (row.status, row.pid, row.attempts) == ("succeeded", fresh.pid, stale.attempt + 1)


def _fence(effect: Effect) -> int:
    return int(effect.note.split("fence=")[1].split()[0])


def _refused(log: str) -> bool:
    return any(
        "its completion is refused" in line.get("message", "") and line.get("key") == KEY
        for line in json_lines(log)
    )
