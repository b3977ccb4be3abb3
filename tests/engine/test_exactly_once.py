"""Lesson 1: hourly in code must not mean hourly per instance. However many apps tick one
database, at the same moment, each occurrence runs once."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

from _engine_support import MakeApp

import oncely
from oncely.testing import Clock

HERE = Path(__file__).parent


def tick_together(apps: list[oncely.App]) -> None:
    barrier = threading.Barrier(len(apps))
    errors: list[BaseException] = []

    def tick(app: oncely.App) -> None:
        barrier.wait()
        try:
            app.tick()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=tick, args=(app,)) for app in apps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []


def test_two_apps_ticking_together_never_run_an_occurrence_twice(
    make_app: MakeApp, clock: Clock
) -> None:
    runs: Counter[str] = Counter()
    lock = threading.Lock()
    apps = [make_app(), make_app(), make_app()]
    for app in apps:

        @app.job(oncely.every(seconds=10), misfire="all", overlap="allow")
        def heartbeat(run: oncely.Run) -> None:
            with lock:
                runs[run.idempotency_key] += 1

        @app.job(overlap="allow")
        def remind(run: oncely.Run) -> None:
            with lock:
                runs[run.idempotency_key] += 1

    for n in range(40):
        apps[0].defer("remind", at=clock() + timedelta(seconds=n), key=f"remind:{n}")
    for _ in range(12):
        clock.advance(seconds=5)
        tick_together(apps)

    assert runs, "nothing ran"
    assert max(runs.values()) == 1, [k for k, n in runs.items() if n > 1]
    history = apps[0].history(limit=1000)
    assert sum(1 for o in history if o.status == "succeeded") == len(runs)
    assert len(runs) == 40 + 6  # every reminder once; a heartbeat each 10 s of the minute


def test_two_worker_processes_drain_a_burst_once(url: str, tmp_path: Path) -> None:
    app = oncely.App(url)  # the real clock: the worker processes use theirs

    @app.job(overlap="allow")
    def burst(run: oncely.Run) -> None:
        raise AssertionError("the worker processes run this, not the test")

    now = app.now() - timedelta(seconds=1)
    for n in range(300):
        app.defer(burst, at=now, key=f"burst:{n}")
    record = tmp_path / "runs.txt"
    workers = [
        subprocess.Popen([sys.executable, str(HERE / "_drain_worker.py"), url, str(record)])
        for _ in range(2)
    ]
    for worker in workers:
        assert worker.wait(timeout=180) == 0

    lines = record.read_text().splitlines()
    keys = Counter(line.split()[0] for line in lines)
    assert len(keys) == 300
    assert max(keys.values()) == 1
    assert len({line.split()[1] for line in lines}) == 2, "both processes should have worked"
    assert {o.status for o in app.history(limit=1000)} == {"succeeded"}
    app.close()
