"""What the CLI tests share: an app module written into tmp_path, and `oncely` run in-process.

Imported by name from the test modules (``from _cli_support import ...``), as the engine tests
import ``_engine_support``.
"""

from __future__ import annotations

import importlib
import json
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner

import oncely
from oncely.cli import main

START = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # a Friday

APP_MODULE = """
from datetime import UTC, datetime, timedelta

import oncely


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class CountingApp(oncely.App):
    closed = 0

    def close(self) -> None:
        type(self).closed += 1
        super().close()


clock = Clock()
app = CountingApp({url!r}, clock=clock)


@app.job(oncely.cron("0 9 * * MON-FRI", tz="Europe/Berlin"))
def digest(run):
    pass


@app.job(oncely.every(minutes=10), retries=1)
def sync(run):
    raise RuntimeError("upstream answered 503\\n[details follow]")


@app.job(oncely.every(minutes=5))
def beat(run):
    pass


@app.job()
def remind(run):
    pass


@app.job()
def export(run):
    pass
"""


@dataclass
class CliApp:
    """The app module under test: ``spec`` names it for `oncely`; ``app`` is the same object."""

    spec: str
    module: ModuleType

    @property
    def app(self) -> oncely.App:
        found: oncely.App = self.module.app
        return found

    @property
    def closed(self) -> int:
        count: int = self.module.CountingApp.closed
        return count

    def advance(self, **delta: float) -> None:
        self.module.clock.advance(**delta)

    def now(self) -> datetime:
        now: datetime = self.module.clock.now
        return now

    def invoke(self, command: str, *args: str) -> Result:
        """``oncely COMMAND MODULE:APP ARGS...``."""
        return run(command, self.spec, *args)


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


def run(*args: str) -> Result:
    """``oncely ARGS...`` in this process, as a pipe sees it: 80 columns, no terminal."""
    result = CliRunner().invoke(
        main,
        list(args),
        prog_name="oncely",
        env={"COLUMNS": "80", "TERM": "xterm-256color", "FORCE_COLOR": None, "NO_COLOR": None},
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Result(result.exit_code, result.stdout, result.stderr)


def make_cli_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> CliApp:
    """Write the app module into ``tmp_path`` under a fresh name and import it."""
    name = f"service_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP_MODULE.format(url=url))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    return CliApp(f"{name}:app", module)


def forget(cli: CliApp) -> None:
    cli.app.close()
    sys.modules.pop(cli.module.__name__, None)


def one_error_line(result: Result) -> str:
    """The single line a failed command wrote to stderr (asserting that it is one)."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stdout == "", result.stdout
    assert lines[0].startswith("Error: ")
    return lines[0]


def parsed(stdout: str) -> Any:
    """``stdout`` as one JSON document, failing if anything else was printed."""
    return json.loads(stdout)
