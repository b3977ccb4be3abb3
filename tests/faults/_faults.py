"""What the fault scenarios share: the worker processes, their schedules, and the two records
compared at the end -- what the handlers left (the independent record) and what history says.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import psycopg

import oncely
from _processes import Workers, workers

HERE = Path(__file__).resolve().parent
LONG = os.environ.get("ONCELY_FAULTS", "short").strip().lower() == "long"
MODES = ("transactional", "at_most_once", "at_least_once")
APP = "_delivery_app:app"


@dataclass(frozen=True)
class Effect:
    """One run of a handler, as the handler itself recorded it."""

    job: str
    key: str
    scheduled_for: datetime
    pid: int
    ran_at: float  # time.time() of the real clock, whatever the app's clock said
    attempt: int = 0
    note: str = ""

    @property
    def occurrence(self) -> tuple[str, datetime]:
        return self.key, self.scheduled_for


@dataclass(frozen=True)
class Row:
    """One occurrence as history records it."""

    job: str
    key: str
    scheduled_for: datetime
    status: str
    attempts: int
    worker: str | None
    reason: str | None

    @property
    def pid(self) -> int | None:
        return None if self.worker is None else int(self.worker.rpartition("#")[2])


def scaled(short: float, long: float) -> float:
    """``long`` under ``ONCELY_FAULTS=long`` (``make faults``), else ``short``."""
    return long if LONG else short


def prepare(url: str) -> None:
    """The tables the handlers write to: transactional effects, and a fenced downstream."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE fault_effects (job text NOT NULL, key text NOT NULL, "
            "scheduled_for timestamptz NOT NULL, pid int NOT NULL, ran_at float8 NOT NULL)"
        )
        connection.execute(
            "CREATE TABLE fault_downstream (name text PRIMARY KEY, last_token bigint NOT NULL, "
            "writer int)"
        )


def scheduling_app(url: str) -> oncely.App:
    """An app in the test process that knows the jobs' names, to schedule them (never runs)."""
    app = oncely.App(url)
    for name in (*MODES, "fenced"):
        app.job(name=name)(_never)
    return app


def _never(run: oncely.Run) -> None:
    raise AssertionError("the worker processes run this, not the test")


def schedule_every_second(url: str, per_mode: int, modes: Iterable[str] = MODES) -> list[str]:
    """``per_mode`` every-second schedules of each job in ``modes``; returns their keys."""
    app = scheduling_app(url)
    keys = []
    for mode in modes:
        for n in range(per_mode):
            key = f"{mode}:{n}"
            app.schedule(mode, oncely.every(seconds=1), key=key)
            keys.append(key)
    app.close()
    return keys


@contextmanager
def fault_workers(
    url: str, tmp_path: Path, *args: str, app: str = APP, **env: str
) -> Iterator[Workers]:
    """`oncely run` processes of ``app`` (none started yet) logging JSON, effects in tmp_path;
    ``env`` names ``ONCELY_TEST_*`` variables in lower case without the prefix."""
    effects = tmp_path / "effects"
    effects.mkdir(exist_ok=True)
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    environment = {
        "ONCELY_DATABASE_URL": url,
        "ONCELY_TEST_EFFECTS": str(effects),
        **{f"ONCELY_TEST_{name.upper()}": value for name, value in env.items()},
    }
    with workers(app, HERE, environment, logs, "--log-format", "json", *args) as group:
        yield group


def effects(url: str, tmp_path: Path) -> list[Effect]:
    """Every run any handler recorded: the transactional rows and the lines of the files."""
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT job, key, scheduled_for, pid, ran_at FROM fault_effects"
        ).fetchall()
    found = [
        Effect(job, key, when.astimezone(UTC), pid, ran_at) for job, key, when, pid, ran_at in rows
    ]
    for path in sorted((tmp_path / "effects").glob("*.txt")):
        for line in path.read_text().splitlines():
            job, key, when, pid, ran_at, attempt, *note = line.split()
            found.append(
                Effect(
                    job,
                    unquote(key),
                    datetime.fromisoformat(when),
                    int(pid),
                    float(ran_at),
                    int(attempt),
                    " ".join(note),
                )
            )
    return found


def history(url: str) -> dict[tuple[str, datetime], Row]:
    """Every occurrence in the database, by (key, scheduled_for)."""
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT s.job, s.key, o.scheduled_for, o.status, o.attempts, o.worker, o.reason "
            "FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id"
        ).fetchall()
    return {
        (key, when.astimezone(UTC)): Row(job, key, when.astimezone(UTC), *rest)
        for job, key, when, *rest in rows
    }


def seconds_between(first: datetime, last: datetime) -> list[datetime]:
    """Every whole second from ``first`` (rounded up) to ``last`` (rounded down)."""
    start = math.ceil(first.timestamp())
    end = math.floor(last.timestamp())
    return [datetime.fromtimestamp(t, UTC) for t in range(start, end + 1)]


def runs(found: Iterable[Effect], job: str | None = None) -> Counter[tuple[str, datetime]]:
    return Counter(e.occurrence for e in found if job is None or e.job == job)


def settled(url: str, expected: Iterable[tuple[str, datetime]], done: set[str]) -> bool:
    """Every one of ``expected`` has a row whose status is in ``done``."""
    rows = history(url)
    return all(o in rows and rows[o].status in done for o in expected)
