"""`oncely run`'s options reach the worker: --concurrency, --retention, --log-level, --http's
metrics from the running process; a worker that cannot start exits 1 with one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import oncely
from _processes import free_port, free_ports, terminate, wait_until, workers

HERE = Path(__file__).resolve().parent
APP = "_options_app:app"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    value: str = request.getfixturevalue(name)
    return value


def _app(url: str, clock: object = None) -> oncely.App:
    """An app of the same jobs as the worker's, for the test's own scheduling and reading."""
    app = oncely.App(url, clock=clock)  # type: ignore[arg-type]
    for name in ("block", "fail", "note"):
        app.job(name=name, overlap="allow")(lambda run: None)
    return app


def _metrics(address: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _most_at_once(events: list[str]) -> int:
    running = most = 0
    for line in events:
        running += 1 if line.startswith("start ") else -1
        most = max(most, running)
    return most


def test_concurrency_bounds_the_running_process_and_its_metrics_say_so(
    url: str, tmp_path: Path
) -> None:
    events, release = tmp_path / "events", tmp_path / "release"
    env = {
        "ONCELY_DATABASE_URL": url,
        "ONCELY_TEST_EVENTS": str(events),
        "ONCELY_TEST_RELEASE": str(release),
    }
    address = f"127.0.0.1:{free_port()}"
    app = _app(url)
    for n in range(5):
        app.defer("block", at=datetime.now(UTC), key=f"b{n}")
    with workers(APP, HERE, env, tmp_path, "--concurrency", "2", "--http", address) as group:
        process = group.start()
        wait_until(lambda: events.exists() and events.read_text().count("start") >= 2, 30, "2")
        wait_until(lambda: _metrics(address).get(("oncely_in_flight", ())) == 2, 10, "in flight")
        release.touch()
        wait_until(
            lambda: [o.status for o in app.history(limit=10)] == ["succeeded"] * 5, 30, "5 runs"
        )
        ran = {("oncely_occurrences_total", (("job", "block"), ("status", "succeeded")))}
        wait_until(lambda: _metrics(address).get(next(iter(ran))) == 5, 10, "5 counted")
        metrics = _metrics(address)
        code, _ = terminate(process, within=30)
        output = group.output()
    assert code == 0, output
    assert "serving 3 job(s) with up to 2 handler(s) at once" in output
    lines = events.read_text().splitlines()
    assert sorted(lines) == sorted(
        [f"start b{n}" for n in range(5)] + [f"end b{n}" for n in range(5)]
    )
    assert _most_at_once(lines) == 2, lines
    assert metrics[("oncely_in_flight", ())] == 0
    assert metrics[("oncely_lag_seconds_count", (("job", "block"),))] == 5
    assert metrics[("oncely_tick_duration_seconds_count", ())] >= 1
    assert metrics[("oncely_tick_failures_total", ())] == 0
    app.close()


def test_retention_prunes_history_older_than_it_and_keeps_the_rest(
    url: str, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    for age, key in ((timedelta(days=2), "old"), (timedelta(hours=12), "recent")):
        then = now - age
        past = _app(url, clock=lambda then=then: then)
        past.defer("note", at=then, key=key)
        past.tick()
        past.close()
    app = _app(url)
    assert {o.key: o.status for o in app.history()} == {"old": "succeeded", "recent": "succeeded"}
    env = {"ONCELY_DATABASE_URL": url}
    with workers(APP, HERE, env, tmp_path, "--retention", "1d") as group:
        process = group.start()
        wait_until(lambda: app.history(key="old") == [], 30, "the 2-day-old run to be pruned")
        code, _ = terminate(process, within=30)
    assert code == 0, group.output()
    (sweep,) = app.store.sweeps()
    assert sweep.pruned == 1  # the sweep that pruned "old" left "recent", 12 hours old
    assert [o.key for o in app.history()] == ["recent"]
    app.close()


def test_log_level_warning_keeps_errors_and_drops_info(sqlite_url: str, tmp_path: Path) -> None:
    app = _app(sqlite_url)
    app.defer("fail", at=datetime.now(UTC), key="f")
    env = {"ONCELY_DATABASE_URL": sqlite_url}
    with workers(APP, HERE, env, tmp_path, "--log-level", "warning") as group:
        process = group.start()
        wait_until(lambda: [o.status for o in app.history()] == ["failed"], 30, "f to fail")
        code, _ = terminate(process, within=30)
        output = group.output()
    assert code == 0, output
    assert "fail 'f'" in output
    assert "failed after attempt 1 of 1" in output
    assert " ERROR " in output
    assert " INFO " not in output  # not even the "serving" line every worker logs
    assert "serving" not in output
    app.close()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["--http", "127.0.0.1"],
            1,
            "Error: HTTP address '127.0.0.1' has no port; write HOST:PORT, e.g. 127.0.0.1:9100",
        ),
        (["--concurrency", "0"], 2, "Error: Invalid value for '--concurrency': 0 is not in the"),
        (["--retention", "0d"], 2, "Error: Invalid value for '--retention': '0d' is not a durat"),
        (["--log-level", "LOUD"], 2, "Error: Invalid value for '--log-level': 'LOUD' is not one"),
    ],
)
def test_a_worker_that_cannot_start_exits_with_one_line(
    sqlite_url: str, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "oncely.cli", "run", APP, *args],
        cwd=HERE, env={**os.environ, "ONCELY_DATABASE_URL": sqlite_url},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith(message), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # one line, no traceback


def test_an_http_address_in_use_exits_1(sqlite_url: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "oncely.cli", "run", APP, "--http", f"127.0.0.1:{port}"],
            cwd=HERE, env={**os.environ, "ONCELY_DATABASE_URL": sqlite_url},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"Error: cannot listen on '127.0.0.1:{port}'"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_workers_given_one_port_range_each_serve_metrics_on_their_own_port_until_it_is_full(
    sqlite_url: str, tmp_path: Path
) -> None:
    ports = free_ports(2)
    address = f"127.0.0.1:{ports[0]}-{ports[-1]}"
    env = {"ONCELY_DATABASE_URL": sqlite_url}
    with workers(APP, HERE, env, tmp_path, "--http", address) as group:
        first = group.start()
        wait_until(group.ready, 30, "the first worker")
        second = group.start()
        wait_until(group.ready, 30, "the second worker")
        assert group.alive() == [first, second], group.output()
        said = [
            f"health and metrics on http://127.0.0.1:{port} (the first free port of {address[10:]})"
            for port in ports
        ]
        assert said[0] in group.text_of(first), group.output()
        assert said[1] in group.text_of(second), group.output()
        for port in ports:
            assert ("oncely_tick_failures_total", ()) in _metrics(f"127.0.0.1:{port}")
        third = group.start()
        assert third.wait(timeout=60) == 1
        refused = group.text_of(third)
        for process in (first, second):
            code, _ = terminate(process, within=30)
            assert code == 0, group.output()
    assert f"Error: cannot listen on '{address}': all 2 ports of the range are in use" in refused
    assert refused.count("\n") == 1, refused
