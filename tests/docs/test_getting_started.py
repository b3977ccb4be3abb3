"""docs/getting-started.md runs as written: every code block on the page, in order, for real.

The page is read as a reader follows it, in a fresh directory:

- a ``python`` block whose first line is ``# NAME.py`` is saved as that file;
- in a ``console`` block each ``$ `` line is a command run in bash, and the lines under it are
  what it prints. ``oncely run`` (a worker, in a terminal of its own) is started in the
  background; the workers are stopped with SIGINT, the page's Ctrl-C, before the next command
  that is not a worker, once they have run for ``RUN_S``. ``export NAME=VALUE`` sets the
  environment of the commands after it;
- a block after an ``<!-- not run: why -->`` comment is not run; only the installation is.

Every command must exit 0, and every line the page shows it printing must be among the lines it
printed, with numbers, times and ``host#pid`` free to differ (and, for a worker, in either
worker's output). The page's PostgreSQL URL is replaced by a throw-away database's. Then the
outcome the page states is checked: each occurrence ran once, and history shows each succeeded.

To refresh the page's samples, ``ONCELY_SHOW_PAGE_OUTPUT=1 pytest tests/docs -s`` prints what
every command printed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
# How long the workers run before the page's Ctrl-C; the page says "a few seconds".
RUN_S = 5.0
COMMAND_TIMEOUT_S = 30.0
BLOCK = re.compile(
    r"(?:<!-- not run: (?P<why>[^>]*?) -->\n)?^```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
FILE_HEADER = re.compile(r"# (?P<name>[\w./-]+\.py)\n")


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    skipped: str | None


@dataclass(frozen=True)
class Command:
    line: str
    shown: list[str]


def blocks(text: str) -> list[Block]:
    return [Block(m["lang"], m["body"], m["why"]) for m in BLOCK.finditer(text)]


def commands(body: str) -> list[Command]:
    """The ``$ `` lines of a console block, each with the output lines shown under it."""
    found: list[Command] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            found.append(Command(line[2:], []))
        elif found and line.strip() and line.strip() != "^C":
            found[-1].shown.append(line)
    return found


def normal(line: str) -> str:
    """A printed line with what may differ between runs made equal: host#pid, numbers, rules."""
    line = re.sub(r"[\w.-]+#\d+", "HOST#PID", line)
    line = re.sub(r"\d+", "N", line)
    line = re.sub(r"─+", "─", line)
    return " ".join(line.split())


def missing(shown: list[str], printed: str) -> list[str]:
    lines = {normal(line) for line in printed.splitlines()}
    return [line for line in shown if normal(line) not in lines]


@dataclass
class Reader:
    """Someone following the page in ``home``: files, environment, terminals with workers."""

    home: Path
    postgres_url: Callable[[], str]
    env: dict[str, str] = field(default_factory=dict)
    workers: list[tuple[subprocess.Popen[bytes], Path, Command]] = field(default_factory=list)
    ready_at: float = 0.0
    outputs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ONCELY_")}
        # `oncely` and `python` are the ones of the environment running the tests.
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env['PATH']}"

    def save(self, body: str) -> None:
        header = FILE_HEADER.match(body)
        assert header, f"a python block must start with '# NAME.py':\n{body}"
        (self.home / header["name"]).write_text(body)

    def run(self, command: Command) -> None:
        words = shlex.split(command.line)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            if name == "ONCELY_DATABASE_URL" and value.startswith("postgresql://"):
                value = self.postgres_url()
            self.env[name] = value
            return
        if words[:2] == ["oncely", "run"]:
            self.start_worker(command)
            return
        self.stop_workers()
        done = subprocess.run(
            ["bash", "-c", command.line],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        printed = done.stdout + done.stderr
        assert done.returncode == 0, f"$ {command.line} exited {done.returncode}:\n{printed}"
        assert not missing(command.shown, printed), (
            f"$ {command.line} did not print {missing(command.shown, printed)}; it printed:\n"
            f"{printed}"
        )
        self.outputs[command.line] = done.stdout
        if os.environ.get("ONCELY_SHOW_PAGE_OUTPUT"):
            print(f"$ {command.line}\n{printed}")

    def start_worker(self, command: Command) -> None:
        log = self.home / f"terminal-{len(self.workers) + 1}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-c", f"exec {command.line}"],
                cwd=self.home,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.workers.append((process, log, command))
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while "serving" not in log.read_text():
            assert process.poll() is None, f"$ {command.line} exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"$ {command.line} did not start"
            time.sleep(0.05)
        self.ready_at = time.monotonic()

    def stop_workers(self) -> None:
        """The page's Ctrl-C in each terminal, once the workers have run for ``RUN_S``."""
        if not self.workers:
            return
        time.sleep(max(0.0, self.ready_at + RUN_S - time.monotonic()))
        for process, _, _ in self.workers:
            process.send_signal(signal.SIGINT)
        printed = ""
        for process, log, command in self.workers:
            code = process.wait(timeout=COMMAND_TIMEOUT_S)
            printed += log.read_text()
            assert code == 0, f"$ {command.line} exited {code} on SIGINT:\n{log.read_text()}"
        if os.environ.get("ONCELY_SHOW_PAGE_OUTPUT"):
            print(printed)
        shown = [line for _, _, command in self.workers for line in command.shown]
        assert not missing(shown, printed), f"the workers did not print {missing(shown, printed)}"
        self.workers = []

    def kill_workers(self) -> None:
        for process, _, _ in self.workers:
            process.kill()
            process.wait()


@pytest.fixture
def reader(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Reader]:
    person = Reader(tmp_path, lambda: str(request.getfixturevalue("empty_postgres_url")))
    try:
        yield person
    finally:
        person.kill_workers()


def test_every_block_of_getting_started_runs_and_does_what_the_page_says(reader: Reader) -> None:
    found = blocks(PAGE.read_text(encoding="utf-8"))
    assert [b.skipped for b in found if b.skipped] == [
        "installing oncely; the test runs in an environment that has it"
    ], "only the installation may go untested"
    for block in found:
        if block.skipped:
            continue
        if block.lang == "python":
            reader.save(block.body)
        else:
            assert block.lang == "console", f"a {block.lang!r} block: say how to test it"
            for command in commands(block.body):
                reader.run(command)
    reader.stop_workers()

    # What the page says happened: each occurrence ran once, in one of the workers ...
    assert "occurrences run more than once: 0" in reader.outputs["python count.py"]
    # ... and history shows each of them, succeeded: every report, and the reminder, once. A
    # report that came due as the workers stopped is pending, as the page says.
    for database in ("sqlite", "postgres"):
        env = dict(reader.env)
        if database == "sqlite":
            env.pop("ONCELY_DATABASE_URL", None)
        done = subprocess.run(
            ["oncely", "history", "tasks:app", "--json"],
            cwd=reader.home,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        history = json.loads(done.stdout)
        ran = [o for o in history if o["status"] == "succeeded"]
        waiting = [o for o in history if o["status"] == "pending"]
        assert len(ran) + len(waiting) == len(history), history
        assert all(w["scheduled_for"] > r["scheduled_for"] for w in waiting for r in ran)
        keys = [o["key"] for o in ran]
        assert keys.count("report") >= 2, history
        assert keys.count("remind:ada") == (1 if database == "sqlite" else 0), history
