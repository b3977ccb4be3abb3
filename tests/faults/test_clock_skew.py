"""Clock skew: two `oncely run` processes whose machine clocks disagree by 30 s (one on time,
one 30 s ahead, played by replacing `oncely.clock.wall`) share every-second schedules and a burst
of one-off occurrences, in all three delivery modes.

Required: no occurrence runs twice, none goes unrecorded, none runs early, and none is skipped
as missed, with leases longer than the skew and shorter. The default clock is the database's
time (this machine's clock plus the offset measured against PostgreSQL), so due times, misfire
and lease expiry are judged alike by both workers. Before it, the worker ahead ran every
occurrence up to 30 s early, recorded the 29 between the real time and its own as skipped, and
with 4 s leases took over the other worker's claims as they were made (at_least_once ran twice,
at_most_once runs were recorded as abandoned).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _faults import (
    MODES,
    effects,
    fault_workers,
    history,
    prepare,
    runs,
    scaled,
    schedule_every_second,
    scheduling_app,
    seconds_between,
    settled,
)

from _processes import terminate, wait_until

SKEW_S = 30
RUN_S = scaled(8.0, 40.0)
PER_MODE = int(scaled(5, 20))
BURST = int(scaled(40, 200))
WORK_S = 0.2
EDGE_S = 2
DONE = {"succeeded", "skipped", "abandoned", "failed"}


@dataclass
class Counts:
    """One delivery mode's occurrences in the run, as its handlers and history tell them."""

    occurrences: int
    twice: int
    # Neither succeeded nor recorded as skipped or abandoned, or succeeded without running.
    silent: int
    early: int  # runs more than 1 s before their time, in the window or after it
    earliest_s: float
    skipped: int
    abandoned_after_running: int

    def line(self, mode: str) -> str:
        return (
            f"{mode}: {self.occurrences} occurrences, {self.twice} twice, {self.silent} silent, "
            f"{self.early} runs early (up to {self.earliest_s:.0f} s), {self.skipped} skipped "
            f"by misfire, {self.abandoned_after_running} abandoned after running"
        )


def _run(url: str, tmp_path: Path, lease_s: float) -> dict[str, Counts]:
    prepare(url)
    keys = schedule_every_second(url, PER_MODE)
    # misfire="all": an occurrence a stalled worker meets late runs late instead of being
    # skipped for a newer one (the long run, on a loaded machine, skipped one per schedule), so
    # every skip counted here is the skew's own doing, and so is every early run.
    with fault_workers(
        url, tmp_path, lease_s=str(lease_s), sleep_s=str(WORK_S), misfire="all"
    ) as group:
        group.start(env={"ONCELY_TEST_SKEW_S": "0"})
        group.start(env={"ONCELY_TEST_SKEW_S": str(SKEW_S)})
        wait_until(group.ready, timeout=30, what="the workers to start")
        started = datetime.now(UTC)
        app = scheduling_app(url)
        burst = []
        for mode in MODES:
            for n in range(BURST):
                app.defer(mode, at=started, key=f"burst:{mode}:{n}")
                burst.append((f"burst:{mode}:{n}", started))
        app.close()
        time.sleep(RUN_S)
        window = seconds_between(
            started + timedelta(seconds=1), datetime.now(UTC) - timedelta(seconds=EDGE_S)
        )
        expected = [(key, when) for key in keys for when in window]
        expected += burst
        wait_until(lambda: settled(url, expected, DONE), 60, "every occurrence to finish")
        for process in group.alive():
            assert terminate(process, within=20)[0] == 0, group.output()
    rows = history(url)
    found = effects(url, tmp_path)
    counts = {}
    for mode in MODES:
        judged = [o for o in expected if f"{mode}:" in o[0]]
        ran = runs(found, mode)
        statuses = {o: rows[o].status for o in judged}
        # Every run counts here, the window's and those of occurrences due after it.
        ahead = [e.scheduled_for.timestamp() - e.ran_at for e in found if e.job == mode]
        counts[mode] = Counts(
            occurrences=len(judged),
            twice=sum(1 for o in judged if ran[o] > 1),
            silent=sum(
                1
                for o in judged
                if statuses[o] not in {"succeeded", "skipped", "abandoned"}
                or (statuses[o] == "succeeded" and ran[o] == 0)
            ),
            early=sum(1 for s in ahead if s > 1),
            earliest_s=max([0.0, *ahead]),
            skipped=sum(1 for o in judged if statuses[o] == "skipped"),
            abandoned_after_running=sum(1 for o in judged if statuses[o] == "abandoned" and ran[o]),
        )
    return counts


def test_leases_longer_than_the_skew_keep_every_occurrence_once(
    postgres_url: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    counts = _run(postgres_url, tmp_path, lease_s=60)
    report(f"clocks {SKEW_S} s apart, 60 s leases, {RUN_S:.0f} s:")
    for mode, found in counts.items():
        report(found.line(mode))
    assert {mode: (c.twice, c.silent) for mode, c in counts.items()} == {
        mode: (0, 0) for mode in MODES
    }
    assert sum(c.early for c in counts.values()) == 0
    assert sum(c.skipped for c in counts.values()) == 0


def test_a_lease_shorter_than_the_skew_is_not_taken_over(
    postgres_url: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    counts = _run(postgres_url, tmp_path, lease_s=4)
    report(f"clocks {SKEW_S} s apart, 4 s leases, {RUN_S:.0f} s:")
    for mode, found in counts.items():
        report(found.line(mode))
    assert counts["transactional"].twice == 0
    assert counts["at_most_once"].twice == 0
    assert all(c.silent == 0 for c in counts.values())
    assert counts["at_least_once"].twice == 0
    assert counts["at_most_once"].abandoned_after_running == 0
    assert sum(c.early for c in counts.values()) == 0
