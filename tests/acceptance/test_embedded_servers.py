"""The FastAPI example (examples/fastapi_app) served by real servers, each with 4 worker processes
running oncely inside them, through a rolling deploy: every occurrence runs exactly once.

Three deployments, each for a 20 s window with one restart in the middle (the new server is up
before the old one is stopped): uvicorn --workers 4 and gunicorn with 4 uvicorn workers on
PostgreSQL, and uvicorn --workers 4 on the embedded SQLite default (one file, four processes on
one machine). The three run side by side to keep the suite's wall time down; each judges its own
window. The example's every-second job writes one row per run in the handler's transaction.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from _processes import Server, free_port, wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi_app"
RUN_S = 20.0
PROCESSES = 4
# Occurrences this close to the stop are not judged: they may not have come due yet.
EDGE_S = 2
READY_S = 90.0
STOP_S = 40.0
_SERVING = re.compile(r"oncely: worker \S+#(\d+) serving")


@dataclass
class Deploy:
    """One deployment's run: what it measured, or the error that ended it."""

    case: str
    window: list[datetime] = field(default_factory=list)
    effects: Counter[datetime] = field(default_factory=Counter)
    statuses: dict[datetime, str] = field(default_factory=dict)
    stops: list[float] = field(default_factory=list)
    logs: str = ""
    error: BaseException | None = None


def _command(case: str, port: int) -> list[str]:
    if case.startswith("gunicorn"):
        return [
            *(sys.executable, "-m", "gunicorn", "main:api", "--pythonpath", str(EXAMPLE)),
            *("--workers", str(PROCESSES), "--worker-class", "uvicorn_worker.UvicornWorker"),
            *("--bind", f"127.0.0.1:{port}"),
        ]
    return [
        *(sys.executable, "-m", "uvicorn", "main:api", "--app-dir", str(EXAMPLE)),
        *("--workers", str(PROCESSES), "--host", "127.0.0.1", "--port", str(port)),
    ]


def _serving(server: Server) -> int:
    """How many of the server's processes have started their oncely loop."""
    return len(set(_SERVING.findall(server.output())))


def _rows(case: str, url: str | None, workdir: Path) -> tuple[list[str], dict[str, str]]:
    """The example's effect rows and the job's occurrences, as ISO times."""
    effects = "SELECT scheduled_for FROM heartbeats"
    occurrences = (
        "SELECT o.scheduled_for, o.status FROM oncely_occurrences o "
        "JOIN oncely_schedules s ON s.id = o.schedule_id WHERE s.job = 'heartbeat'"
    )
    if url is None:
        with sqlite3.connect(workdir / "oncely.db") as conn:
            ran = [str(row[0]) for row in conn.execute(effects)]
            # SQLite rows keep UTC microseconds since the epoch.
            statuses = {
                datetime.fromtimestamp(when / 1e6, UTC).isoformat(): status
                for when, status in conn.execute(occurrences)
            }
        return ran, statuses
    with psycopg.connect(url) as conn:
        ran = [str(row[0]) for row in conn.execute(effects)]
        statuses = {
            when.astimezone(UTC).isoformat(): status for when, status in conn.execute(occurrences)
        }
    return ran, statuses


def _deploy(deploy: Deploy, url: str | None, workdir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ONCELY_DATABASE_URL"}
    env["HOME"] = str(workdir)  # gunicorn's control socket: one per server, not one shared
    if url is not None:
        env["ONCELY_DATABASE_URL"] = url  # else the default: sqlite:///oncely.db in workdir
    servers = [
        Server(_command(deploy.case, free_port()), env=env, cwd=workdir, log=workdir / name)
        for name in ("old.log", "new.log")
    ]
    old, new = servers
    try:
        old.start()
        wait_until(lambda: _serving(old) >= PROCESSES, READY_S, f"{deploy.case}: old server")
        began = time.monotonic()
        time.sleep(RUN_S / 2)
        new.start()  # the rolling deploy: the new server is up before the old one stops
        wait_until(lambda: _serving(new) >= PROCESSES, READY_S, f"{deploy.case}: new server")
        code, took = old.terminate(STOP_S)
        assert code == 0, old.output()
        deploy.stops.append(took)
        time.sleep(max(began + RUN_S - time.monotonic(), 0.0))
        stopped = datetime.now(UTC)
        code, took = new.terminate(STOP_S)
        assert code == 0, new.output()
        deploy.stops.append(took)
    finally:
        for server in servers:
            server.kill()
        deploy.logs = "\n".join(f"--- {s.log.name}\n{s.output()}" for s in servers)
    ran, statuses = _rows(deploy.case, url, workdir)
    deploy.effects = Counter(datetime.fromisoformat(when) for when in ran)
    deploy.statuses = {datetime.fromisoformat(when): status for when, status in statuses.items()}
    first = min(deploy.statuses)
    last = stopped.replace(microsecond=0) - timedelta(seconds=EDGE_S)
    count = int((last - first).total_seconds()) + 1
    deploy.window = [first + timedelta(seconds=n) for n in range(count)]


CASES = ["uvicorn-postgres", "gunicorn-postgres", "uvicorn-sqlite"]


@pytest.fixture(scope="module")
def deploys(
    request: pytest.FixtureRequest,
    postgres_databases: Callable[[], str],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Deploy | BaseException]:
    """Run the selected cases side by side; each case's result, or why it could not run."""
    selected = [
        case
        for case in CASES
        if any(
            getattr(item, "callspec", None) is not None
            and item.callspec.params.get("case") == case
            and item.module is request.module
            for item in request.session.items
        )
    ]
    results: dict[str, Deploy | BaseException] = {}
    threads = []
    for case in selected:
        url = None
        if case.endswith("postgres"):
            try:
                url = postgres_databases()
            except (pytest.skip.Exception, pytest.fail.Exception) as outcome:
                results[case] = outcome  # the case's own test skips (fails, under CI)
                continue
        deploy = Deploy(case)
        results[case] = deploy
        workdir = tmp_path_factory.mktemp(case)

        def run(deploy: Deploy = deploy, url: str | None = url, workdir: Path = workdir) -> None:
            try:
                _deploy(deploy, url, workdir)
            except BaseException as exc:
                deploy.error = exc

        threads.append(threading.Thread(target=run, name=case))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, marks=[pytest.mark.postgres] if "postgres" in case else [])
        for case in CASES
    ],
)
def test_a_rolling_deploy_of_four_process_servers_runs_every_occurrence_once(
    deploys: dict[str, Deploy | BaseException], case: str
) -> None:
    deploy = deploys[case]
    if not isinstance(deploy, Deploy):
        raise deploy
    if deploy.error is not None:
        print(deploy.logs)
        raise deploy.error
    window, effects = deploy.window, deploy.effects
    once = [w for w in window if effects[w] == 1]
    twice = {w: n for w, n in effects.items() if n > 1}
    missed = [w for w in window if effects[w] == 0]
    not_succeeded = {
        w: deploy.statuses.get(w) for w in window if deploy.statuses.get(w) != "succeeded"
    }
    print(
        f"{case}: {len(window)} occurrences in the window, {len(once)} ran once, "
        f"{len(twice)} duplicates, {len(missed)} missed; "
        f"stops took {', '.join(f'{s:.2f} s' for s in deploy.stops)}"
    )
    if twice or missed or not_succeeded:
        print(deploy.logs)
    assert len(window) >= RUN_S - 2 * EDGE_S
    assert twice == {}
    assert missed == []
    assert not_succeeded == {}
