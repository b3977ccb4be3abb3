"""`oncely lint` in a real process: what it loads, and the console script's way around click.

The console script (``oncely.cli:console``) runs ``oncely lint [PATH]...`` without options
itself; every other command line goes through the click group, ``python -m oncely.cli``.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from oncely.cli.lint import lint
from oncely.lint import command

# As the installed script runs it: sys.argv[0] names the program.
CONSOLE = "import sys; sys.argv[0] = 'oncely'; from oncely.cli import console; console()"
CLICK = "from oncely.cli import main; main(prog_name='oncely')"
# Writes the modules loaded when the process ends to $MODULES_SEEN, after whatever exits it.
WATCH = (
    "import atexit, json, os, sys; "
    "atexit.register(lambda: open(os.environ['MODULES_SEEN'], 'w')"
    ".write(json.dumps(sorted(sys.modules)))); "
)
FORBIDDEN = ("oncely.app", "oncely.engine", "oncely.store", "oncely.worker", "psycopg", "redis")


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str
    modules: frozenset[str]

    def said(self) -> tuple[int, str, str]:
        return self.code, self.stdout, self.stderr


def _oncely(entry: str, cwd: Path, *args: str) -> Ran:
    seen = cwd.parent / f"modules-{os.getpid()}.json"
    done = subprocess.run(
        [sys.executable, "-c", WATCH + entry, *args],
        cwd=cwd,
        env={**os.environ, "MODULES_SEEN": str(seen)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    modules = frozenset(json.loads(seen.read_text()))
    seen.unlink()
    return Ran(done.returncode, done.stdout, done.stderr, modules)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.oncely.lint]\n")
    (root / "pkg" / "clean.py").write_text("x = 1\n")
    (root / "pkg" / "loop.py").write_text("import time\n\nwhile True:\n    time.sleep(1)\n")
    (root / "suppressed.py").write_text("y = 2  # oncely: allow ONC101\n")
    return root


@pytest.mark.parametrize("entry", [CONSOLE, CLICK], ids=["console", "click"])
def test_lint_loads_neither_the_engine_nor_the_stores_nor_rich(project: Path, entry: str) -> None:
    cold = _oncely(entry, project, "lint")
    assert cold.code == 1
    assert not [name for name in cold.modules if name.startswith((*FORBIDDEN, "rich"))]
    assert "oncely.lint.rules.onc101_recurring_timer_loop" in cold.modules
    warm = _oncely(entry, project, "lint")
    assert (warm.code, warm.stdout) == (1, cold.stdout)
    # Every file came from the cache: no rule is built, nor imported.
    assert not [name for name in warm.modules if name.startswith("oncely.lint.rules.onc")]


@pytest.mark.parametrize(
    "args",
    [
        ("lint",),
        ("lint", "pkg"),
        ("lint", "pkg/clean.py", "suppressed.py"),
        ("lint", "pkg/clean.py"),
        ("lint", "--no-cache"),  # the option, though a file has that name
        ("lint", "pkg", "--no-cache", "suppressed.py", "--no-cache"),
    ],
)
def test_the_console_lints_plain_paths_without_click_as_click_would(
    project: Path, args: tuple[str, ...]
) -> None:
    (project / "--no-cache").write_text("def f(:\n")
    by_click = _oncely(CLICK, project, "lint", "--no-cache", *args[1:])
    fast = _oncely(CONSOLE, project, *args)
    assert "click" not in fast.modules
    assert fast.said() == by_click.said()
    assert (project / ".oncely_cache").exists() is ("--no-cache" not in args)


@pytest.mark.parametrize(
    "args",
    [
        ("lint", "missing.py"),
        ("lint", "--rules"),
        ("lint", "--", "pkg"),
        ("lint", "-h"),
        ("--version",),
        ("lint", "pkg", "--format", "json"),
        ("lint", "--no-cache", "--", "pkg"),
        ("lint", "--no-cache=1"),
    ],
)
def test_any_other_command_line_goes_through_click(project: Path, args: tuple[str, ...]) -> None:
    (project / "--no-cache").write_text("def f(:\n")
    by_click = _oncely(CLICK, project, *args)
    console = _oncely(CONSOLE, project, *args)
    assert "click" in console.modules
    assert console.said() == by_click.said()


def test_a_configuration_error_is_reported_by_click(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.oncely.lint]\ncolour = 1\n")
    console = _oncely(CONSOLE, project, "lint", "pkg")
    assert console.code == 2
    assert console.stderr.startswith("Error: ")
    assert "unknown key 'colour'" in console.stderr
    assert "(see 'oncely lint --help')" in console.stderr
    assert console.stderr.count("\n") == 1
    assert console.stdout == ""


def test_a_reader_that_stops_early_ends_the_run_quietly(project: Path) -> None:
    many = "".join(f"x{n} = {n}  # oncely: allow ONC101\n" for n in range(3000))
    (project / "many.py").write_text(many)
    # Buffered output, as a terminal's or a pipe's usually is: unbuffered, a write to a closed
    # pipe can end short instead of failing.
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    for entry in (CONSOLE, CLICK):
        with subprocess.Popen(
            [sys.executable, "-c", entry, "lint", "many.py"],
            cwd=project,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as process:
            assert process.stdout is not None
            assert process.stderr is not None
            process.stdout.read(100)
            process.stdout.close()
            stderr = process.stderr.read()
            assert (process.wait(timeout=60), stderr) == (1, b"")


def test_an_interrupted_run_says_aborted_as_click_does(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "run", interrupted)
    monkeypatch.chdir(project)
    from oncely.cli import console, main

    monkeypatch.setattr(sys, "argv", ["oncely", "lint", "pkg"])
    with pytest.raises((SystemExit, KeyboardInterrupt)) as by_console:
        console()
    assert isinstance(by_console.value, SystemExit)
    assert (by_console.value.code, capsys.readouterr().err) == (1, "\nAborted!\n")
    with pytest.raises(SystemExit) as by_click:
        main(["lint", "pkg"], prog_name="oncely")
    assert (by_click.value.code, capsys.readouterr().err) == (1, "\nAborted!\n")


def test_the_console_runs_lint_with_the_defaults_the_command_declares() -> None:
    """The console calls command.run(paths) alone: its defaults must be what click passes for
    a command line without options, and no option may come from the environment."""
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(command.run).parameters.items()
    }
    assert lint.make_context("lint", []).params == defaults
    assert all(isinstance(param, click.Option) for param in lint.params[1:])
    assert not [param.name for param in lint.params if param.envvar]
