"""The `oncely` command group: exit codes in its help, one-line usage errors, `python -m`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _cli_support import one_error_line, run


def test_help_documents_the_exit_codes() -> None:
    done = run("--help")
    assert done.code == 0
    assert "Exit status:\n" in done.stdout
    assert "    0  success\n" in done.stdout
    assert "    1  the operation failed: an oncely error" in done.stdout
    assert "    2  usage error: a bad MODULE:APP or a bad option value" in done.stdout
    for command in ["jobs", "history", "trigger", "pause", "resume", "explain", "backfill"]:
        assert f"  {command} " in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bogus"], "Error: No such command 'bogus'. (see 'oncely --help')"),
        (["--bogus"], "Error: No such option '--bogus'. (see 'oncely --help')"),
        (["jobs", "--bogus"], "Error: No such option '--bogus'. (see 'oncely jobs --help')"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = run(*args)
    assert done.code == 2
    assert one_error_line(done) == message


def test_a_real_process_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "oncely.cli", "history", "svc:app", "--since", "soon"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("Error: Invalid value for '--since': 'soon' is not a time")
    assert done.stderr.count("\n") == 1
