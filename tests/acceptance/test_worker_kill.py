"""Three `oncely run` processes on PostgreSQL, one SIGKILLed and restarted every few seconds.

An every-second job runs for 20 s. Under ``transactional`` no occurrence has two effects (its
effect commits with its completion); under ``at_least_once`` none goes unrun (a killed worker's
claims are taken over once their 4 s leases expire).
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from _processes import Workers, terminate, wait_until, workers

RUN_S = 20.0
KILL_EVERY_S = 3.0
# Occurrences this close to the end are not judged: they may not have come due yet.
EDGE_S = 2


def _occurrences(url: str) -> dict[datetime, str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT o.scheduled_for, o.status FROM oncely_occurrences o "
            "JOIN oncely_schedules s ON s.id = o.schedule_id WHERE s.job = 'beat'"
        ).fetchall()
    return {when.astimezone(UTC): status for when, status in rows}


def _kill_and_restart(group: Workers, seconds: float) -> int:
    rng = random.Random(7)
    kills = 0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        time.sleep(KILL_EVERY_S)
        victim = rng.choice(group.alive())
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        kills += 1
        group.start()
    return kills


def _window(occurrences: dict[datetime, str], stopped: datetime) -> list[datetime]:
    first = min(occurrences)
    last = stopped.replace(microsecond=0) - timedelta(seconds=EDGE_S)
    count = int((last - first).total_seconds()) + 1
    return [first + timedelta(seconds=n) for n in range(count)]


def _run(postgres_url: str, tmp_path: Path, delivery: str) -> tuple[list[datetime], int]:
    env = {
        "ONCELY_DATABASE_URL": postgres_url,
        "ONCELY_TEST_DELIVERY": delivery,
        "ONCELY_TEST_BEAT": "1",
        "ONCELY_TEST_EFFECTS": str(tmp_path / "effects.txt"),
    }
    with workers(env, tmp_path, "--concurrency", "4", "--drain-timeout", "10") as group:
        for _ in range(3):
            group.start()
        kills = _kill_and_restart(group, RUN_S)
        stopped = datetime.now(UTC)
        # A SIGTERM before a worker's loop has installed its handlers ends it the default way.
        wait_until(group.ready, timeout=20, what="the restarted worker to start")
        for process in group.alive():
            code, took = terminate(process, within=15)
            assert code == 0, group.output()
            assert took < 10 + 2, f"SIGTERM took {took:.1f} s"
        occurrences = _occurrences(postgres_url)
        window = _window(occurrences, stopped)
        # Claims held by the last killed worker finish once their leases expire: one more
        # worker finishes them.
        finisher = group.start()
        try:
            wait_until(
                lambda: all(_occurrences(postgres_url).get(w) == "succeeded" for w in window),
                timeout=30,
                what="every occurrence in the window to succeed",
            )
        except AssertionError:
            now = _occurrences(postgres_url)
            print({str(w.time()): now.get(w) for w in window if now.get(w) != "succeeded"})
            with psycopg.connect(postgres_url) as conn:
                for row in conn.execute(
                    "SELECT scheduled_for, status, reason, created_at FROM oncely_occurrences "
                    "WHERE status <> 'succeeded' ORDER BY scheduled_for"
                ):
                    print(row)
            raise
        terminate(finisher, within=15)
    assert len(window) >= RUN_S - 2 * EDGE_S
    return window, kills


def test_transactional_never_runs_an_occurrence_twice_under_sigkill(
    postgres_url: str, tmp_path: Path
) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE effects (scheduled_for timestamptz NOT NULL, pid int NOT NULL)")
    window, kills = _run(postgres_url, tmp_path, "transactional")
    with psycopg.connect(postgres_url) as conn:
        effects = Counter(
            when.astimezone(UTC)
            for (when,) in conn.execute("SELECT scheduled_for FROM effects").fetchall()
        )
    twice = {w: n for w, n in effects.items() if n > 1}
    missing = [w for w in window if effects[w] == 0]
    print(
        f"transactional: {len(window)} occurrences, {kills} kills, {len(twice)} twice, "
        f"{len(missing)} missing"
    )
    assert kills >= 5
    assert twice == {}
    assert missing == []


def test_at_least_once_misses_no_occurrence_under_sigkill(
    postgres_url: str, tmp_path: Path
) -> None:
    window, kills = _run(postgres_url, tmp_path, "at_least_once")
    lines = (tmp_path / "effects.txt").read_text().splitlines()
    ran = Counter(datetime.fromisoformat(line.split()[0]) for line in lines)
    missing = [w for w in window if ran[w] == 0]
    print(
        f"at_least_once: {len(window)} occurrences, {kills} kills, "
        f"{sum(1 for w in window if ran[w] > 1)} run twice, {len(missing)} missing"
    )
    assert kills >= 5
    assert missing == []
