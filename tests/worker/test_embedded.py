"""Embedded mode: `app.start()` runs the worker loop on a background thread, `app.stop()` drains.

Real stores and the real clock; drain timeouts are short so that each test takes about a second.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import urllib.error
import urllib.request
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _serving import eventually

import oncely
from oncely.arguments import Retention
from oncely.engine import worker_id
from oncely.errors import ConfigurationError
from oncely.worker.loop import Worker


def _loops() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "oncely-worker" and t.is_alive()]


def _status(app: oncely.App, key: str) -> str | None:
    found = [o for o in app.history(key) if o.key == key]
    return found[0].status if found else None


def _succeeded(app: oncely.App, key: str) -> bool:
    return _status(app, key) == "succeeded"


@pytest.fixture
def app(sqlite_url: str) -> oncely.App:
    return oncely.App(sqlite_url)


def test_start_returns_at_once_and_the_loop_runs_jobs_until_stop(app: oncely.App) -> None:
    ran: list[str] = []

    @app.job()
    def note(run: oncely.Run) -> None:
        ran.append(threading.current_thread().name)

    app.defer(note, at=datetime.now(UTC), key="first")
    started = time.monotonic()
    app.start()
    assert time.monotonic() - started < 0.5
    try:
        eventually(lambda: _succeeded(app, "first"), what="the deferred job to run")
        assert ran == ["oncely-handler"]
        assert len(_loops()) == 1
    finally:
        started = time.monotonic()
        app.stop(timeout=5)
        took = time.monotonic() - started
    print(f"stop() with nothing running took {took:.3f} s")
    assert took < 1.0
    assert _loops() == []


def test_start_from_many_threads_at_once_starts_one_loop(
    app: oncely.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[Worker] = []
    real_run = Worker.run

    def counted(self: Worker) -> None:
        runs.append(self)
        real_run(self)

    monkeypatch.setattr(Worker, "run", counted)
    barrier = threading.Barrier(8)

    def start() -> None:
        barrier.wait()
        app.start()

    callers = [threading.Thread(target=start) for _ in range(8)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    try:
        eventually(lambda: runs, what="the loop to start")
        time.sleep(0.1)  # a second loop, if one had been started, would have begun by now
        assert (len(runs), len(_loops())) == (1, 1)
        app.start()  # and again once it runs
        assert len(runs) == 1
    finally:
        app.stop(timeout=5)


def test_stop_before_start_does_nothing_and_start_after_stop_starts_anew(app: oncely.App) -> None:
    @app.job()
    def note(run: oncely.Run) -> None: ...

    started = time.monotonic()
    app.stop()
    assert time.monotonic() - started < 0.1
    with pytest.raises(ConfigurationError, match="timeout=-1"):
        app.stop(timeout=-1)
    app.start()
    app.stop(timeout=5)
    app.defer(note, at=datetime.now(UTC), key="after")
    app.start()
    try:
        eventually(lambda: _succeeded(app, "after"), what="the restarted loop to run the job")
    finally:
        app.stop(timeout=5)
    assert _loops() == []


def test_stop_returns_within_its_timeout_while_a_handler_runs(url: str) -> None:
    app = oncely.App(url)
    entered, release = threading.Event(), threading.Event()

    @app.job()
    def stuck(run: oncely.Run) -> None:
        entered.set()
        release.wait(30)

    app.defer(stuck, at=datetime.now(UTC), key="stuck")
    app.start()
    try:
        assert entered.wait(10), "the handler did not start"
        started = time.monotonic()
        app.stop(timeout=1)
        took = time.monotonic() - started
        print(f"stop(timeout=1) with a handler running took {took:.3f} s")
        assert took < 1.2
        assert _loops() == []
        (left,) = app.history("stuck")
        assert left.status == "running"
        assert left.lease_expires_at is not None
        assert left.reason is not None
        assert "drain timeout" in left.reason
        assert "left to expire" in left.reason
    finally:
        release.set()
        app.close()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_stop_called_inside_a_handler_returns_at_once(app: oncely.App, kind: str) -> None:
    took: list[float] = []

    def stop_from_handler() -> None:
        started = time.monotonic()
        app.stop(timeout=10)
        took.append(time.monotonic() - started)

    if kind == "sync":

        @app.job(name="stopper")
        def stopper(run: oncely.Run) -> None:
            stop_from_handler()

    else:

        @app.job(name="stopper")
        async def stopper_async(run: oncely.Run) -> None:
            stop_from_handler()
            await asyncio.sleep(0)

    app.defer("stopper", at=datetime.now(UTC), key="stop")
    app.start()
    try:
        eventually(lambda: took, what="the handler to call stop()")
        assert took[0] < 0.5
        # The loop stops claiming, lets this handler finish, books it, and ends.
        eventually(lambda: not _loops(), what="the loop to end")
        assert _status(app, "stop") == "succeeded"
    finally:
        app.stop(timeout=5)


def test_an_error_that_ends_the_loop_is_logged_and_start_starts_anew(
    app: oncely.App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    @app.job()
    def note(run: oncely.Run) -> None: ...

    def broken(self: Worker) -> None:
        raise RuntimeError("planted loop failure")

    real_loop = Worker._loop
    monkeypatch.setattr(Worker, "_loop", broken)
    with caplog.at_level(logging.ERROR, logger="oncely"):
        app.start()
        eventually(lambda: not _loops(), what="the broken loop to end")
    (record,) = [r for r in caplog.records if "background worker loop failed" in r.message]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert "planted loop failure" in str(record.exc_info[1])
    monkeypatch.setattr(Worker, "_loop", real_loop)
    app.defer(note, at=datetime.now(UTC), key="again")
    app.start()
    try:
        eventually(lambda: _succeeded(app, "again"), what="a new loop to run the job")
    finally:
        app.stop(timeout=5)


def test_the_loop_installs_no_signal_handlers_and_serves_no_http(app: oncely.App) -> None:
    @app.job()
    def note(run: oncely.Run) -> None: ...

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    app.defer(note, at=datetime.now(UTC), key="quiet")
    app.start()
    try:
        eventually(lambda: _succeeded(app, "quiet"), what="the job to run")
        assert {sig: signal.getsignal(sig) for sig in before} == before
        embedded = app._embedded
        assert embedded is not None
        worker = embedded.worker
        assert worker is not None
        assert worker.http_address is None
    finally:
        app.stop(timeout=5)


def test_close_stops_a_started_loop(app: oncely.App) -> None:
    app.start()
    eventually(lambda: _loops(), what="the loop to start")
    app.close()
    assert _loops() == []


_AT_EXIT = """
    import sys, time
    from datetime import UTC, datetime
    import oncely

    app = oncely.App(sys.argv[1])

    @app.job()
    def slow(run):
        open(sys.argv[2], "w").close()
        time.sleep(1)

    app.defer(slow, at=datetime.now(UTC), key="slow")
    app.start()
    while True:
        try:
            open(sys.argv[2]).close()
            break
        except FileNotFoundError:
            time.sleep(0.02)
    # The script ends here, with the handler running: interpreter exit must drain it.
"""


def test_interpreter_exit_drains_a_started_loop(sqlite_url: str, tmp_path: Path) -> None:
    script = tmp_path / "exits.py"
    script.write_text(textwrap.dedent(_AT_EXIT))
    started = tmp_path / "started"
    done = subprocess.run(
        [sys.executable, str(script), sqlite_url, str(started)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    app = oncely.App(sqlite_url)
    try:
        assert _status(app, "slow") == "succeeded", done.stderr
    finally:
        app.close()


def test_a_forked_child_has_no_loop_and_starts_its_own(url: str) -> None:
    app = oncely.App(url)

    @app.job()
    async def note(run: oncely.Run) -> None:
        await asyncio.sleep(0)

    def ran_here(key: str) -> bool:
        found = app.history(key)
        return bool(found) and found[0].worker == worker_id()

    app.defer(note, at=datetime.now(UTC), key="parent-1")
    app.start()
    go_read, go_write = os.pipe()
    try:
        # The async handler started the engine's event loop thread, which a child lacks.
        eventually(lambda: _succeeded(app, "parent-1"), what="the parent's job to run")
        with warnings.catch_warnings():
            # Python 3.12+ warns that forking a threaded process may deadlock: what this tests.
            warnings.simplefilter("ignore", DeprecationWarning)
            child = os.fork()
        if child == 0:  # pragma: no cover (the child reports by its exit code)
            code = 1
            try:
                embedded = app._embedded
                assert embedded is not None
                assert embedded.worker is None
                assert _loops() == []
                os.read(go_read, 1)  # once the parent's loop is stopped, so that ours runs it
                app.defer(note, at=datetime.now(UTC), key="child")
                app.start()
                eventually(lambda: _succeeded(app, "child"), timeout=10, what="the child's job")
                assert ran_here("child")
                app.stop(timeout=5)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        # The parent's loop drains on its own connections while the child lives.
        app.stop(timeout=5)
        os.write(go_write, b"!")
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        app.defer(note, at=datetime.now(UTC), key="parent-2")
        app.start()
        eventually(lambda: _succeeded(app, "parent-2"), what="the parent's new loop to run")
        assert ran_here("parent-2")
    finally:
        os.close(go_read)
        os.close(go_write)
        app.close()


def _get(address: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as failed:
        return failed.code, failed.read().decode()


def test_start_with_http_serves_health_and_the_running_workers_metrics(app: oncely.App) -> None:
    @app.job()
    def note(run: oncely.Run) -> None: ...

    app.defer(note, at=datetime.now(UTC), key="served")
    app.start(http="127.0.0.1:0")
    try:
        eventually(lambda: _succeeded(app, "served"), what="the deferred job to run")
        embedded = app._embedded
        assert embedded is not None
        worker = embedded.worker
        assert worker is not None
        address = worker.http_address
        assert address is not None
        assert address.startswith("127.0.0.1:")
        assert not address.endswith(":0")  # the port it bound, not the one asked for
        sample = 'oncely_occurrences_total{job="note",status="succeeded"} 1.0'
        eventually(lambda: sample in _get(address, "/metrics")[1], what=sample)
        code, body = _get(address, "/healthz")
        assert (code, json.loads(body)["status"]) == (200, "ok")
    finally:
        app.stop(timeout=5)
    with pytest.raises(urllib.error.URLError):
        _get(address, "/healthz")  # stopped: nothing listens there any more


@pytest.mark.parametrize(
    ("http", "message"),
    [
        ("127.0.0.1", "HTTP address '127.0.0.1' has no port; write HOST:PORT"),
        ("127.0.0.1:http", "the port must be a number from 0 to 65535"),
        ("::1:9100", "write an IPv6 host in brackets, e.g. [::1]:9100"),
    ],
)
def test_start_with_an_unusable_http_address_raises_and_starts_nothing(
    app: oncely.App, http: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        app.start(http=http)
    assert _loops() == []
    assert app._embedded is None or app._embedded.worker is None


def test_start_with_an_http_address_in_use_raises(app: oncely.App) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        try:
            with pytest.raises(ConfigurationError, match="cannot listen on"):
                app.start(http=f"127.0.0.1:{port}")
        finally:
            app.stop(timeout=5)


@pytest.mark.parametrize(
    ("retention", "kept"),
    [
        ("7d", Retention(timedelta(days=7))),
        (timedelta(hours=36), Retention(timedelta(hours=36))),
        (
            "30d, failed=12w,skipped=7d",
            Retention(
                timedelta(days=30), {"failed": timedelta(weeks=12), "skipped": timedelta(days=7)}
            ),
        ),
    ],
)
def test_retention_is_a_timedelta_or_a_duration_as_oncely_run_reads_it(
    app: oncely.App, retention: timedelta | str, kept: Retention
) -> None:
    app.start(retention=retention)
    try:
        worker = app._embedded.worker if app._embedded is not None else None
        assert worker is not None
        assert worker.housekeeping.retention == kept
    finally:
        app.stop(timeout=5)


@pytest.mark.parametrize(
    "retention",
    ["0d", "30 days", timedelta(0), -timedelta(days=1), 30, "30d,running=1d", "30d,failed",
     "30d,failed=0d", "30d,failed=1d,failed=2d"],
)  # fmt: skip
def test_a_retention_that_keeps_nothing_or_is_no_duration_raises_and_starts_nothing(
    app: oncely.App, retention: object
) -> None:
    """Unchecked, timedelta(0) made housekeeping prune every finished occurrence, and a str
    failed the loop at its first sweep, on its thread, after start() had returned."""
    with pytest.raises(ConfigurationError, match=r"^retention=.*: give how long to keep history"):
        app.start(retention=retention)  # type: ignore[arg-type]
    assert _loops() == []
