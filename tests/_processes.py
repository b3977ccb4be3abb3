"""Real processes for the acceptance and fault tests (`oncely run` workers, web servers
embedding oncely): start, signal, wait, always stop.

Each process runs ``oncely run MODULE:APP`` from a directory holding the module, with the test's
environment, and logs to its own file in ``logs`` (``worker-<n>.log``, in start order).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class Workers:
    """`oncely run` processes of one test; `start` may give one its own app or environment."""

    def __init__(self, spec: str, cwd: Path, env: dict[str, str], logs: Path, *args: str) -> None:
        self.spec = spec
        self.cwd = cwd
        self.env = {**os.environ, **env}
        self.logs = logs
        self.args = args
        self.started: list[subprocess.Popen[bytes]] = []

    def start(
        self, spec: str | None = None, env: dict[str, str] | None = None, *args: str
    ) -> subprocess.Popen[bytes]:
        log = self.log_of(len(self.started))
        command = ["run", spec or self.spec, *self.args, *args]
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "oncely.cli", *command],
                cwd=self.cwd,
                env={**self.env, **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.started.append(process)
        return process

    def log_of(self, index: int) -> Path:
        return self.logs / f"worker-{index}.log"

    def text_of(self, process: subprocess.Popen[bytes]) -> str:
        return self.log_of(self.started.index(process)).read_text(errors="replace")

    def ready(self) -> bool:
        """Every live worker has started its loop (its signal handlers are in place)."""
        return all(" serving " in self.text_of(p) for p in self.alive())

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.started if p.poll() is None]

    def output(self) -> str:
        return "\n".join(
            f"--- {self.log_of(n).name}\n{self.text_of(p)}" for n, p in enumerate(self.started)
        )

    def stop_all(self) -> None:
        for process in self.alive():
            process.kill()
        for process in self.started:
            process.wait()


@contextmanager
def workers(spec: str, cwd: Path, env: dict[str, str], logs: Path, *args: str) -> Iterator[Workers]:
    group = Workers(spec, cwd, env, logs, *args)
    try:
        yield group
    finally:
        group.stop_all()


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON log lines of a ``--log-format json`` worker's output (other lines skipped)."""
    found = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def terminate(process: subprocess.Popen[bytes], within: float) -> tuple[int, float]:
    """SIGTERM ``process``; return its exit code and how long it took to exit."""
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=within)
    return code, time.monotonic() - started


def wait_until(predicate: object, timeout: float, what: str) -> None:
    """Poll ``predicate()`` every 0.1 s until it is true; fail naming ``what`` after ``timeout``."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def free_ports(count: int) -> range:
    """``count`` consecutive TCP ports on 127.0.0.1 that nothing listens on now."""
    for _ in range(100):
        first = free_port()
        if first + count > 65536:
            continue
        probes: list[socket.socket] = []
        try:
            for port in range(first, first + count):
                probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                probes.append(probe)
                probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
        return range(first, first + count)
    raise AssertionError(f"found no {count} consecutive free ports")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Server:
    """A web server (uvicorn, gunicorn) run as a command in a process group of its own.

    Its output goes to ``log``; `kill` ends the whole group (the master and every worker it
    forked or spawned), for a ``finally`` that must leave nothing running.
    """

    def __init__(self, command: list[str], *, env: dict[str, str], cwd: Path, log: Path) -> None:
        self.command = command
        self.env = env
        self.cwd = cwd
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                self.command,
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def terminate(self, within: float) -> tuple[int, float]:
        """SIGTERM the server (its master drains its workers); its exit code and seconds taken."""
        assert self.process is not None
        return terminate(self.process, within)

    def kill(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


# No proxy: an HTTP_PROXY in the environment sent requests for 127.0.0.1 through it.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(address: str, path: str) -> tuple[int, bytes]:
    """GET ``path`` from ``HOST:PORT``: the status and the body, of an error status too."""
    try:
        with _OPENER.open(f"http://{address}{path}", timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()
