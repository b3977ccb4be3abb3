"""The workers page and its /api twin: each worker's heartbeat and its age, live or silent,
what it runs now (its leases) and its versions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from _web_support import Clock, build, call, claim

import oncely
from oncely.model import WorkerBeat
from oncely.web import dashboard


@pytest.fixture
def seeded(sqlite_url: str) -> Iterator[tuple[oncely.App, Clock]]:
    app, clock = build(sqlite_url)
    clock.now += timedelta(minutes=1)
    now = clock.now
    app.store.beat(WorkerBeat("web-1#11", now - timedelta(hours=1), now - timedelta(seconds=30),
                          "1.2.3", "c0ffee" * 8))  # fmt: skip
    app.store.beat(WorkerBeat("web-2#22", now - timedelta(hours=2), now - timedelta(minutes=10),
                          "1.2.2", "decaf0" * 8))  # fmt: skip
    claim(app, "beat", "web-1#11")
    claim(app, "digest", "old-9#99")
    yield app, clock
    app.close()


def test_the_twin_lists_live_workers_first_with_heartbeat_age_in_flight_and_versions(
    seeded: tuple[oncely.App, Clock],
) -> None:
    app, _ = seeded
    answer = call(dashboard(app), "GET", "/api/workers")
    rows = {w["worker"]: w for w in json.loads(answer.body)["workers"]}
    assert [w["worker"] for w in json.loads(answer.body)["workers"]] == [
        "web-1#11", "web-2#22", "old-9#99",
    ]  # fmt: skip
    live = rows["web-1#11"]
    assert (live["live"], live["heartbeat_age_seconds"], live["in_flight"]) == (True, 30.0, 1)
    assert (live["oncely_version"], live["code_version"]) == ("1.2.3", "c0ffee" * 8)
    assert (rows["web-2#22"]["live"], rows["web-2#22"]["in_flight"]) == (False, 0)
    older = rows["old-9#99"]  # a worker of a version that writes no heartbeat: by its lease
    assert (older["live"], older["heartbeat_at"], older["in_flight"]) == (False, None, 1)


def test_the_page_says_live_or_silent_and_how_long_ago(seeded: tuple[oncely.App, Clock]) -> None:
    app, _ = seeded
    page = call(dashboard(app), "GET", "/workers").body
    rows = page.split('id="workers"', 1)[1].split("</table>", 1)[0].split("<tr")
    first = next(r for r in rows if "web-1#11" in r)
    assert ">live</span> 30 s ago" in first
    assert "<td>1.2.3</td>" in first
    assert "c0ffeec0ffee</code>" in first
    assert ">silent</span> 10 min ago" in next(r for r in rows if "web-2#22" in r)
    assert "no heartbeat" in next(r for r in rows if "old-9#99" in r)
