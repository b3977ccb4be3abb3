"""Kill: 4 `oncely run` processes on PostgreSQL, a random one SIGKILLed every 3 s and restarted.

Schedules firing every second are split across three jobs, one per delivery mode, so one run
judges all three. Every occurrence due in the run is counted twice over: what its handler
recorded (a row committed with the completion for ``transactional``, a line appended by the
handler for the others) against what history says. Required: ``transactional`` no occurrence run
twice and none missing; ``at_most_once`` none run twice and each one succeeded or ``abandoned``
(never silently lost); ``at_least_once`` none missing, and a second run only where a killed
worker had started the first.

Long (``make faults``): 500 schedules, 120 s. Short (``make test``): 150 schedules, 20 s. On
this two-core machine 500 in the short run took 60-70 s end to end instead of 25 s: each kill
leaves a backlog that the restarted interpreters and the other three workers, sharing the cores
with PostgreSQL, clear only slowly, and a starved worker falls behind its own heartbeats (its 4 s
leases run out while it is alive; counted below).
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _faults import (
    MODES,
    Effect,
    Row,
    effects,
    fault_workers,
    history,
    prepare,
    runs,
    scaled,
    schedule_every_second,
    seconds_between,
    settled,
)

from _processes import Workers, terminate, wait_until

RUN_S = scaled(20.0, 120.0)
SCHEDULES = int(scaled(150, 500))
WORKERS = 4
KILL_EVERY_S = 3.0
LEASE_S = 4
# Each handler works this long after making its effect, so that a kill finds handlers mid-call
# (with instant handlers it almost only found claims not yet started): about 6 at once per
# worker, within its 8 handler slots (the default). More slots held more connections (a
# transactional handler holds one while it works) than a shared server has to spare: at 32
# slots, workers took all 100.
WORK_S = scaled(0.15, 0.05)
# A run counts as cut short by a kill that came before its lease ran out: its handler still
# working, or its outcome not yet booked (on a starved machine, booking took over 2 s).
CUT_SHORT_S = LEASE_S
# Occurrences this close to the end are not judged: they may not have come due everywhere yet.
EDGE_S = 2


def _kill_and_restart(group: Workers, seconds: float, rng: random.Random) -> dict[int, float]:
    """SIGKILL a random worker every 3 s and start another; return when each pid was killed."""
    killed: dict[int, float] = {}
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        time.sleep(min(KILL_EVERY_S, max(until - time.monotonic(), 0.0)))
        if time.monotonic() >= until:
            break
        victim = rng.choice(group.alive())
        victim.send_signal(signal.SIGKILL)
        killed[victim.pid] = time.time()
        victim.wait()
        group.start()
    return killed


def test_sigkill_every_3_s_duplicates_and_misses_per_delivery_mode(
    postgres_url: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    prepare(postgres_url)
    keys = schedule_every_second(postgres_url, SCHEDULES // len(MODES))
    with fault_workers(
        postgres_url,
        tmp_path,
        "--drain-timeout",
        "10",
        lease_s=str(LEASE_S),
        sleep_s=str(WORK_S),
        # A backlog left by a kill is run, not skipped as missed: this test is about delivery.
        misfire="all",
    ) as group:
        for _ in range(WORKERS):
            group.start()
        wait_until(group.ready, timeout=30, what="the workers to start")
        started = datetime.now(UTC)
        killed = _kill_and_restart(group, RUN_S, random.Random(7))
        stopped = datetime.now(UTC)
        window = seconds_between(
            started + timedelta(seconds=1), stopped - timedelta(seconds=EDGE_S)
        )
        expected = [(key, when) for key in keys for when in window]
        # The live workers finish what the last kills left, once its leases expire.
        wait_until(
            lambda: settled(postgres_url, expected, {"succeeded", "abandoned", "failed"}),
            timeout=scaled(60, 180),
            what="every occurrence of the run to finish",
        )
        # A SIGTERM before a worker's loop has installed its handlers ends it the default way.
        wait_until(group.ready, timeout=30, what="the restarted worker to start")
        for process in group.alive():
            code, _ = terminate(process, within=20)
            assert code == 0, group.output()
    rows = history(postgres_url)
    found = effects(postgres_url, tmp_path)
    report(
        f"{RUN_S:.0f} s, {WORKERS} workers, {len(killed)} SIGKILLs, {len(keys)} schedules every "
        f"second, {len(window)} s judged"
    )
    problems = []
    for mode in MODES:
        judged = [o for o in expected if o[0].startswith(f"{mode}:")]
        line, found_problems = JUDGES[mode](judged, runs(found, mode), rows, found, killed)
        report(f"{mode}: {len(judged)} occurrences, {line}")
        problems += [f"{mode}: {problem}" for problem in found_problems]
    assert len(killed) >= RUN_S // KILL_EVERY_S - 1
    assert problems == [], f"{len(problems)} problems, the first: {problems[:10]}"


Occurrence = tuple[str, datetime]
Judged = tuple[str, list[str]]


def _transactional(
    judged: list[Occurrence], ran: Counter[Occurrence], rows: dict[Occurrence, Row], *_: object
) -> Judged:
    twice = [o for o in judged if ran[o] > 1]
    missing = [o for o in judged if ran[o] == 0]
    problems = [f"ran {ran[o]} times: {o}" for o in twice]
    problems += [f"never ran: {o}, {rows[o].status}" for o in missing]
    problems += [f"{rows[o].status}: {o}" for o in judged if rows[o].status != "succeeded"]
    return f"{len(twice)} twice, {len(missing)} missing", problems


def _at_most_once(
    judged: list[Occurrence],
    ran: Counter[Occurrence],
    rows: dict[Occurrence, Row],
    found: list[Effect],
    killed: dict[int, float],
) -> Judged:
    twice = [o for o in judged if ran[o] > 1]
    succeeded = [o for o in judged if rows[o].status == "succeeded"]
    abandoned = [o for o in judged if rows[o].status == "abandoned"]
    # Silent: history says it ran and no handler did, or it is neither succeeded nor abandoned.
    silent = [o for o in succeeded if ran[o] != 1]
    silent += [o for o in judged if rows[o].status not in {"succeeded", "abandoned"}]
    problems = [f"ran {ran[o]} times: {o}" for o in twice]
    problems += [f"{rows[o].status}, ran {ran[o]} times: {o}" for o in silent]
    had_run = sum(1 for o in abandoned if ran[o])
    # A worker that was never killed but fell behind its heartbeats (a starved machine) loses
    # its leases too: counted, not failed.
    alive = sum(1 for o in abandoned if rows[o].pid not in killed)
    return (
        f"{len(twice)} twice, {len(succeeded)} succeeded, {len(abandoned)} abandoned "
        f"({had_run} had run, {len(abandoned) - had_run} had not started; {alive} from "
        f"workers never killed), {len(silent)} silent",
        problems,
    )


def _at_least_once(
    judged: list[Occurrence],
    ran: Counter[Occurrence],
    rows: dict[Occurrence, Row],
    found: list[Effect],
    killed: dict[int, float],
) -> Judged:
    missing = [o for o in judged if ran[o] == 0]
    twice = {o for o in judged if ran[o] > 1}
    # A second run is allowed only after a first one cut short: every run but the last (the one
    # booked) was on a worker SIGKILLed before it could book it (within its lease).
    earlier: dict[Occurrence, list[Effect]] = {o: [] for o in twice}
    for effect in sorted(found, key=lambda e: e.ran_at):
        if effect.occurrence in earlier:
            earlier[effect.occurrence].append(effect)
    uncut = [
        (o, e)
        for o, effects in earlier.items()
        for e in effects[:-1]
        if not e.ran_at <= killed.get(e.pid, 0) <= e.ran_at + CUT_SHORT_S
    ]
    problems = [f"never ran: {o}, {rows[o].status}" for o in missing]
    problems += [
        f"ran {ran[o]} times, one on pid {e.pid}, never killed mid-run: {o}" for o, e in uncut
    ]
    problems += [f"{rows[o].status}: {o}" for o in judged if rows[o].status != "succeeded"]
    cut = sum(ran[o] - 1 for o in twice) - len(uncut)
    return (
        f"{len(missing)} missing, {len(twice)} twice ({cut} runs cut short by a SIGKILL)",
        problems,
    )


JUDGES = {
    "transactional": _transactional,
    "at_most_once": _at_most_once,
    "at_least_once": _at_least_once,
}
