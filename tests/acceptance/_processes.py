"""Real processes for the acceptance tests (`oncely run` workers, web servers embedding oncely):
start, signal, wait, always stop."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent


class Workers:
    """`oncely run _worker_app:app` processes sharing one environment; each logs to a file."""

    def __init__(self, env: dict[str, str], logs: Path, *args: str) -> None:
        self.env = {**os.environ, **env}
        self.logs = logs
        self.args = args
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        log = self.logs / f"worker-{len(self.started)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "oncely.cli", "run", "_worker_app:app", *self.args],
                cwd=HERE,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.started.append(process)
        return process

    def ready(self) -> bool:
        """Every live worker has started its loop (its signal handlers are in place)."""
        alive = {p.pid for p in self.alive()}
        logs = [
            path.read_text(errors="replace")
            for n, path in enumerate(self._logs())
            if self.started[n].pid in alive
        ]
        return all(" serving " in text for text in logs)

    def _logs(self) -> list[Path]:
        return [self.logs / f"worker-{n}.log" for n in range(len(self.started))]

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.started if p.poll() is None]

    def output(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')}"
            for path in sorted(self.logs.glob("worker-*.log"))
        )

    def stop_all(self) -> None:
        for process in self.alive():
            process.kill()
        for process in self.started:
            process.wait()


@contextmanager
def workers(env: dict[str, str], logs: Path, *args: str) -> Iterator[Workers]:
    group = Workers(env, logs, *args)
    try:
        yield group
    finally:
        group.stop_all()


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
