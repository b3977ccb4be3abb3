"""Database outage: every connection of two `oncely run` processes to PostgreSQL is cut mid-run
and refused for a while, then let through again (a restart as the workers see it).

PostgreSQL is shared with the rest of the suite, so it is never actually restarted: the workers
reach it through a TCP proxy on loopback that the test cuts (tests/_proxy.py). Required: the
workers ride it out without being restarted; ``/healthz`` answers 503 during the outage and 200
again after it; each worker logs the outage as one ERROR with its traceback and one recovery
line; and history accounts for every occurrence due meanwhile, each matching what its handler
recorded: succeeded and run (once, for ``transactional`` and ``at_most_once``), or skipped or
abandoned with a reason and not run (``at_most_once`` abandoned may have run, once). Misfire is
the default, ``skip``: of the occurrences missed in the outage the newest runs, the others are
recorded as skipped.

This replaces the in-process test of the same outage (tests/worker/test_database_outage.py) and
keeps its checks: the 503 body, the log lines, a row for every occurrence due, none run twice.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
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
    seconds_between,
    settled,
)

from _processes import Workers, json_lines, terminate, wait_until
from _proxy import proxied

OUTAGE_S = scaled(5.0, 30.0)
PER_MODE = int(scaled(10, 100))
LEASE_S = 4
# Run this long before the cut and after the recovery.
STEADY_S = scaled(3.0, 10.0)
EDGE_S = 2
DONE = {"succeeded", "skipped", "abandoned", "failed"}


def _address(log: str) -> str | None:
    for line in json_lines(log):
        found = re.search(r"health and metrics on http://(\S+)", line["message"])
        if found:
            return found.group(1)
    return None


def _health(address: str) -> tuple[int, object, object]:
    """The status code, and the body's "status" and "reason", of ``address``'s /healthz (0: no
    answer)."""
    try:
        with urllib.request.urlopen(f"http://{address}/healthz", timeout=2) as response:
            body = json.loads(response.read())
            return int(response.status), body.get("status"), body.get("reason")
    except urllib.error.HTTPError as error:
        body = json.loads(error.read())
        return int(error.code), body.get("status"), body.get("reason")
    except OSError:
        return 0, None, None


class _Watch:
    """Polls each worker's /healthz every 0.2 s on a thread; keeps the answers in order."""

    def __init__(self, addresses: list[str]) -> None:
        self.seen: dict[str, list[tuple[int, object, object]]] = {a: [] for a in addresses}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            for address, seen in self.seen.items():
                seen.append(_health(address))

    def latest(self, address: str) -> int | None:
        seen = self.seen[address]
        return seen[-1][0] if seen else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def reasons(self, address: str) -> list[tuple[int, object]]:
        """Each change of answer in order, with the reason of a 503."""
        changes: list[tuple[int, object]] = []
        for code, _, reason in self.seen[address]:
            if not changes or changes[-1] != (code, reason):
                changes.append((code, reason))
        return changes

    def story(self, address: str) -> list[int]:
        """The distinct answers in order: [200, 503, 200] for an outage seen and recovered."""
        story: list[int] = []
        for code, _ in self.reasons(address):
            if not story or story[-1] != code:
                story.append(code)
        return story


def _outage_lines(group: Workers) -> list[tuple[int, int, bool]]:
    """Per worker: first-failure ERROR lines, those with a traceback, and a recovery line."""
    counts = []
    for process in group.started:
        lines = json_lines(group.text_of(process))
        errors = [
            line
            for line in lines
            if line["level"] == "ERROR"
            and re.match(r"oncely: (tick|store) failed:", line["message"])
        ]
        recovered = any("recovered after" in line["message"] for line in lines)
        counts.append((len(errors), sum(1 for line in errors if "exc" in line), recovered))
    return counts


def test_workers_ride_out_a_database_outage_and_account_for_every_occurrence(
    postgres_url: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    prepare(postgres_url)
    keys = schedule_every_second(postgres_url, PER_MODE)
    with (
        proxied(postgres_url) as (proxy, through),
        fault_workers(through, tmp_path, "--http", "127.0.0.1:0", lease_s=str(LEASE_S)) as group,
    ):
        first, second = group.start(), group.start()
        wait_until(group.ready, timeout=30, what="the workers to start")
        addresses = [_address(group.text_of(p)) for p in (first, second)]
        assert None not in addresses, group.output()
        watch = _Watch([a for a in addresses if a is not None])
        try:
            started = datetime.now(UTC)
            time.sleep(STEADY_S)
            proxy.cut()
            cut_at = datetime.now(UTC)
            time.sleep(OUTAGE_S)
            proxy.restore()
            restored_at = datetime.now(UTC)
            wait_until(
                lambda: all(watch.latest(a) == 200 for a in watch.seen),
                timeout=40,
                what="/healthz to answer 200 again",
            )
            recovered_at = datetime.now(UTC)
            time.sleep(STEADY_S)
            window = seconds_between(
                started + timedelta(seconds=1), datetime.now(UTC) - timedelta(seconds=EDGE_S)
            )
            expected = [(key, when) for key in keys for when in window]
            wait_until(
                lambda: settled(postgres_url, expected, DONE),
                timeout=30,
                what="every occurrence of the run to finish",
            )
        finally:
            watch.stop()
        assert group.alive() == [first, second], "a worker exited: " + group.output()
        for process in (first, second):
            assert terminate(process, within=20)[0] == 0, group.output()
    rows = history(postgres_url)
    found = effects(postgres_url, tmp_path)
    during = [o for o in expected if cut_at <= o[1] <= recovered_at]
    recovered_s = (recovered_at - restored_at).total_seconds()
    report(
        f"outage of {OUTAGE_S:.0f} s, 2 workers (never restarted), {len(keys)} schedules every "
        f"second; /healthz {' / '.join('-'.join(map(str, watch.story(a))) for a in watch.seen)}; "
        f"200 again {recovered_s:.1f} s after the proxy let connections through"
    )
    problems: list[str] = []
    for mode in MODES:
        judged = [o for o in expected if o[0].startswith(f"{mode}:")]
        ran = runs(found, mode)
        statuses = {o: rows[o].status for o in judged}
        for o in judged:
            status, reason, n = statuses[o], rows[o].reason, ran[o]
            if status == "succeeded" and (n == 0 or (n > 1 and mode != "at_least_once")):
                problems.append(f"{mode} {o}: succeeded and ran {n} times")
            elif status in {"skipped", "abandoned"} and not reason:
                problems.append(f"{mode} {o}: {status} without a reason")
            elif status == "skipped" and not (reason or "").startswith("misfire:"):
                problems.append(f"{mode} {o}: skipped: {reason}")
            elif status == "skipped" and n:
                problems.append(f"{mode} {o}: skipped, yet ran {n} times")
            elif status == "abandoned" and (mode != "at_most_once" or n > 1):
                problems.append(f"{mode} {o}: abandoned after {n} runs")
            elif status == "failed":
                problems.append(f"{mode} {o}: failed: {rows[o].reason}")
        mine = [o for o in during if o in statuses]
        tally = {s: sum(1 for o in judged if statuses[o] == s) for s in sorted(DONE)}
        report(
            f"{mode}: {len(judged)} occurrences, {len(mine)} due from the cut to /healthz 200; "
            + ", ".join(f"{n} {s}" for s, n in tally.items() if n)
            + f"; {sum(1 for o in judged if ran[o] > 1)} ran twice"
        )
    assert problems == [], f"{len(problems)} problems, the first: {problems[:10]}"
    for address, seen in watch.seen.items():
        assert watch.story(address)[-3:] == [200, 503, 200], (
            f"{address}: {watch.reasons(address)}\n{group.output()}"
        )
        assert {body for code, body, _ in seen if code == 503} == {"failing"}
    for mode in MODES:
        assert any(
            rows[o].status == "succeeded" and o[1] > restored_at
            for o in expected
            if o[0].startswith(f"{mode}:")
        ), f"{mode} did not fire again after the outage"
    lines = _outage_lines(group)
    assert lines == [(1, 1, True), (1, 1, True)], f"{lines}\n{group.output()}"
