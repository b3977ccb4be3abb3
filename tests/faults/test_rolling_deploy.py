"""Rolling deploy: two workers of version 1 run alone, two of version 2 join them (it changes
`report` from every 2 s to every 3 s, removes `legacy` and adds `fresh`), both versions run side
by side, then the version 1 workers stop and version 2 runs alone.

Required: no occurrence runs twice; nothing is replayed (no run comes more than a moment after
its time, and none of the old trigger's times runs once the new trigger took over, but for one
already claimed); `report` misses none of its times under either trigger; `legacy` stops when
version 2 starts (its schedule ``removed``), though version 1, which still declares it, runs on;
`fresh` runs every second from then on, only on version 2.

And an old worker started mid-deploy (a restart, an autoscaler) leaves version 2's triggers
alone: reconciliation goes by code version, the newest first seen, not by who started last.
Before it did, that worker put the 2 s trigger back and revived `legacy`.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from _faults import Effect, effects, fault_workers, history, prepare, scaled, seconds_between

from _processes import Workers, terminate, wait_until

V1, V2 = "_deploy_v1:app", "_deploy_v2:app"
ALONE_S = scaled(4.0, 20.0)
TOGETHER_S = scaled(6.0, 30.0)
EDGE_S = 2
# The most a run may come after its time before it counts as late (a replay).
LATE_S = 1.5


def _schedule(url: str, key: str) -> tuple[str, int | None]:
    """Schedule ``key``'s status and, for an every() trigger, its period in seconds."""
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT status, (trigger_spec->>'seconds')::int FROM oncely_schedules WHERE key = %s",
            (key,),
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def _saved(url: str, keys: tuple[str, ...]) -> bool:
    """Whether schedules ``keys`` are saved: a worker saves its code's schedules at its first
    tick, after it logs that it is serving, and their series start then."""
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT count(*) FROM oncely_schedules WHERE key = ANY(%s)", (list(keys),)
        ).fetchone()
    return row is not None and row[0] == len(keys)


def _switched(url: str) -> datetime:
    """Wait for version 2 to put its trigger on `report`; return about when it did."""
    wait_until(lambda: _schedule(url, "report")[1] == 3, 20, "version 2 to reconcile")
    return datetime.now(UTC)


def _start(group: Workers, spec: str, count: int) -> list[int]:
    pids = [group.start(spec).pid for _ in range(count)]
    wait_until(group.ready, timeout=30, what=f"{spec} to start")
    return pids


def _grid(first: datetime, last: datetime, every: int) -> list[datetime]:
    return [w for w in seconds_between(first, last) if math.floor(w.timestamp()) % every == 0]


def test_old_and_new_versions_side_by_side_then_the_old_ones_stop(
    postgres_url: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    prepare(postgres_url)
    with fault_workers(postgres_url, tmp_path, app=V1) as group:
        old = _start(group, V1, 2)
        # Counted from "serving", a loaded machine's first tick came after the first second
        # judged, which no series had yet: legacy "missed" it.
        wait_until(lambda: _saved(postgres_url, ("report", "legacy")), 20, "v1's schedules")
        started = datetime.now(UTC)
        time.sleep(ALONE_S)
        new = _start(group, V2, 2)
        switched = _switched(postgres_url)
        time.sleep(TOGETHER_S)
        for process in group.started[:2]:
            assert terminate(process, within=20)[0] == 0, group.output()
        old_stopped = datetime.now(UTC)
        time.sleep(ALONE_S)
        for process in group.started[2:]:
            assert terminate(process, within=20)[0] == 0, group.output()
        stopped = datetime.now(UTC) - timedelta(seconds=EDGE_S)
    legacy_status = _schedule(postgres_url, "legacy")[0]
    found = effects(postgres_url, tmp_path)
    by_job: dict[str, list[Effect]] = {}
    for effect in found:
        by_job.setdefault(effect.job, []).append(effect)
    ran = Counter(e.occurrence for e in found)
    twice = [o for o, n in ran.items() if n > 1]
    late = [e for e in found if e.ran_at - e.scheduled_for.timestamp() > LATE_S]
    reports = by_job.get("report", [])
    times = {e.scheduled_for for e in reports}
    # The old trigger's next time may already have been claimed when the new one took over.
    settled = switched + timedelta(seconds=2)
    off_grid = [e for e in reports if e.scheduled_for > settled and e.scheduled_for.second % 3]
    missed = [w for w in _grid(started, switched - timedelta(seconds=1), 2) if w not in times]
    missed += [w for w in _grid(switched + timedelta(seconds=1), stopped, 3) if w not in times]
    legacy = by_job.get("legacy", [])
    after_removal = [e for e in legacy if e.scheduled_for > switched + timedelta(seconds=1)]
    legacy_missed = [
        w
        for w in seconds_between(started, switched - timedelta(seconds=1))
        if w not in {e.scheduled_for for e in legacy}
    ]
    fresh = by_job.get("fresh", [])
    fresh_missed = [
        w
        for w in seconds_between(switched + timedelta(seconds=1), stopped)
        if w not in {e.scheduled_for for e in fresh}
    ]
    together = [e for e in reports if switched < e.scheduled_for <= old_stopped]
    report(
        f"v1 alone {ALONE_S:.0f} s, v1 and v2 together {TOGETHER_S:.0f} s, v2 alone "
        f"{ALONE_S:.0f} s: {len(found)} runs, {len(twice)} twice, {len(late)} late (replayed)"
    )
    report(
        f"report (every 2 s, then 3 s): {len(reports)} runs, {len(missed)} missed, "
        f"{len(off_grid)} on the old trigger after the switch; side by side "
        f"{sum(1 for e in together if e.pid in old)} on v1, "
        f"{sum(1 for e in together if e.pid in new)} on v2"
    )
    report(
        f"legacy ({legacy_status}): {len(legacy)} runs, {len(legacy_missed)} missed before, "
        f"{len(after_removal)} after its removal; fresh (added): {len(fresh)} runs, "
        f"{len(fresh_missed)} missed, {sum(1 for e in fresh if e.pid not in new)} on v1"
    )
    assert twice == []
    assert late == []
    assert (missed, off_grid) == ([], [])
    rows = history(postgres_url)
    assert (legacy_status, legacy_missed, after_removal) == ("removed", [], []), [
        rows.get(("legacy", w)) for w in legacy_missed
    ]
    assert fresh_missed == []
    assert all(e.pid in new for e in fresh)
    # Which version runs `report` side by side is not judged: whichever worker prepares first
    # claims it ahead, and on a loaded machine that was version 2's every time (30 s, 10 runs).


def test_an_old_worker_started_mid_deploy_leaves_the_new_triggers_alone(
    postgres_url: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    prepare(postgres_url)
    with fault_workers(postgres_url, tmp_path, app=V1) as group:
        _start(group, V1, 1)
        _start(group, V2, 1)
        _switched(postgres_url)
        _start(group, V1, 1)
        late_start = datetime.now(UTC)
        time.sleep(TOGETHER_S)
        for process in group.alive():
            assert terminate(process, within=20)[0] == 0, group.output()
    found = effects(postgres_url, tmp_path)
    resurrected = [e for e in found if e.job == "legacy" and e.scheduled_for > late_start]
    two_seconds = [
        e
        for e in found
        if e.job == "report" and e.scheduled_for > late_start and e.scheduled_for.second % 3
    ]
    report(
        f"v1, then v2, then one more v1 ({TOGETHER_S:.0f} s): legacy ran {len(resurrected)} "
        f"times after its removal, report {len(two_seconds)} times on the old trigger; "
        f"schedules: report every {_schedule(postgres_url, 'report')[1]} s, legacy "
        f"{_schedule(postgres_url, 'legacy')[0]}"
    )
    assert (resurrected, two_seconds) == ([], [])
    assert _schedule(postgres_url, "report") == ("active", 3)
    assert _schedule(postgres_url, "legacy")[0] == "removed"
