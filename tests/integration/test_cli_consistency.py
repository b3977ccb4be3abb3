"""The command line as a new user meets it: one row per line, help in 80 columns, overdue runs
named, the same words for a trigger everywhere, --json everywhere, plain errors for a bad
MODULE:APP, and stored text never reaching the terminal raw."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _cli_support import CliApp, forget, make_cli_app, one_error_line, parsed, run

import oncely
from oncely.cli import main


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> Iterator[CliApp]:
    made = make_cli_app(tmp_path, monkeypatch, sqlite_url)
    yield made
    forget(made)


def populate(cli: CliApp) -> None:
    app = cli.app
    app.tick()
    app.for_tenant("acme-corporation").schedule(
        "remind", oncely.every(hours=6), key="remind:acme:a-rather-long-key-name"
    )
    app.schedule("remind", oncely.every(hours=1), key="remind:ops")
    for _ in range(2):
        cli.advance(minutes=10)
        app.tick()
    app.close()


def rows(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.strip()]


def test_jobs_prints_one_row_per_schedule_on_one_line_in_80_columns(cli: CliApp) -> None:
    populate(cli)
    done = cli.invoke("jobs")
    assert done.code == 0, done.stderr
    lines = rows(done.stdout)
    assert max(map(len, lines)) <= 80, done.stdout
    header = lines[0].split()
    assert header[:2] == ["key", "job"], lines[0]
    assert "tenant" in header
    row = next(line for line in lines if line.startswith("remind:ops "))
    assert row.split()[1] == "remind"
    assert "every hour" in row
    long_row = next(line for line in lines if line.startswith("remind:ac"))
    assert "acme-corp" in long_row
    assert "every 6 hours" in long_row
    # one line per schedule, one per unscheduled job, the header and its rule
    assert len(lines) == 2 + 5 + 1, done.stdout


def test_history_prints_one_row_per_occurrence_on_one_line_in_80_columns(cli: CliApp) -> None:
    populate(cli)
    done = cli.invoke("history")
    assert done.code == 0, done.stderr
    lines = rows(done.stdout)
    assert max(map(len, lines)) <= 80, done.stdout
    count = len(parsed(cli.invoke("history", "--json").stdout))
    assert len(lines) == 2 + count, done.stdout
    failed = next(line for line in lines if " failed " in line)
    assert failed.startswith("2026-03-27T12:")
    assert "sync" in failed
    assert "RuntimeError: upstream" in failed  # cut at 80 columns, whole in --json


def test_every_help_fits_80_columns() -> None:
    commands = [[], *([name] for name in main.list_commands(None))]  # type: ignore[arg-type]
    for command in commands:
        done = run(*command, "--help")
        assert done.code == 0, (command, done.stderr)
        wide = [line for line in done.stdout.splitlines() if len(line) > 80]
        assert not wide, (command, wide)


def test_jobs_and_explain_say_a_next_run_is_overdue_and_when_a_worker_was_last_seen(
    cli: CliApp,
) -> None:
    populate(cli)
    cli.advance(minutes=45)  # no tick: no worker runs
    listing = cli.invoke("jobs")
    beat = next(line for line in rows(listing.stdout) if line.startswith("beat "))
    assert "overdue" in beat, listing.stdout
    assert "a worker was last seen at 2026-03-27T12:20:00Z (45m ago)" in listing.stdout
    explained = cli.invoke("explain", "beat")
    assert "overdue since 2026-03-27T12:25:00Z" in explained.stdout, explained.stdout
    assert "worker last seen 2026-03-27T12:20:00Z (45m ago)" in explained.stdout
    document = parsed(cli.invoke("explain", "beat", "--json").stdout)
    assert document["overdue"] is True
    assert document["worker_seen_at"].startswith("2026-03-27T12:20:00")
    assert parsed(cli.invoke("jobs", "--json").stdout)[0]["overdue"] in (True, False)


def test_explain_names_the_trigger_as_jobs_does(cli: CliApp) -> None:
    populate(cli)
    explained = cli.invoke("explain", "beat")
    assert explained.stdout.splitlines()[0].startswith("beat: job beat, every 5 minutes, ")
    assert "every(" not in explained.stdout


def test_history_of_an_unknown_key_fails_like_explain(cli: CliApp) -> None:
    populate(cli)
    done = cli.invoke("history", "no-such-key")
    assert done.code == 1
    assert "no schedule has key 'no-such-key'" in one_error_line(done)


def test_pausing_a_paused_schedule_says_so(cli: CliApp) -> None:
    populate(cli)
    assert cli.invoke("pause", "beat").code == 0
    again = cli.invoke("pause", "beat")
    assert again.code == 0
    assert again.stdout.strip() == "'beat' is already paused; nothing changed"
    cli.invoke("resume", "beat")
    twice = cli.invoke("resume", "beat")
    assert twice.stdout.strip() == "'beat' is not paused; nothing changed"


def test_every_command_has_json(cli: CliApp) -> None:
    populate(cli)
    cli.advance(seconds=30)
    trigger = parsed(cli.invoke("trigger", "beat", "--json").stdout)
    assert trigger["key"] == "beat"
    assert trigger["added"] == 1
    paused = parsed(cli.invoke("pause", "beat", "--json").stdout)
    assert paused["paused"] is True
    assert paused["changed"] is True
    resumed = parsed(cli.invoke("resume", "beat", "--json").stdout)
    assert resumed["paused"] is False
    backfilled = parsed(
        cli.invoke(
            "backfill", "beat", "--since", "2026-03-27T11:00", "--until", "2026-03-27T11:30",
            "--json",
        ).stdout
    )  # fmt: skip
    assert backfilled["added"] == 7
    previewed = parsed(
        run("preview", "0 9 * * *", "--tz", "Europe/Berlin", "-n", "2", "--json").stdout
    )
    assert len(previewed["occurrences"]) == 2
    migrated = parsed(cli.invoke("migrate", "--json").stdout)
    assert migrated["applied"] == []
    assert migrated["version"] >= 1


def write_module(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / f"{name}.py").write_text(text)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("tasks_other", "tasks_empty"):
        sys.modules.pop(name, None)


def test_a_module_app_naming_something_else_says_what_it_is(in_tmp: Path) -> None:
    write_module(in_tmp, "tasks_other", "def report():\n    pass\n")
    done = run("jobs", "tasks_other:report")
    assert done.code == 2
    assert "'report' in module 'tasks_other' is a function, not an oncely.App" in one_error_line(
        done
    )


def test_a_path_as_module_app_is_an_error_naming_the_module_form(in_tmp: Path) -> None:
    done = run("jobs", "./tasks.py:app")
    assert done.code == 2
    assert "'./tasks.py:app' is a file path; name the module instead: tasks:app" in (
        one_error_line(done)
    )


def test_jobs_of_an_app_with_no_jobs_asks_whether_the_module_is_imported(in_tmp: Path) -> None:
    url = f"sqlite:///{in_tmp / 'empty.db'}"
    write_module(in_tmp, "tasks_empty", f"import oncely\napp = oncely.App({url!r})\n")
    done = run("jobs", "tasks_empty:app")
    assert done.code == 0
    assert "no jobs are declared on tasks_empty:app" in done.stdout
    assert "is the module that declares them imported by tasks_empty?" in done.stdout


def test_stored_control_characters_are_escaped_in_jobs_history_and_explain(cli: CliApp) -> None:
    populate(cli)
    evil = "\x1b[2J\x1b]0;owned\x07"
    cli.app.for_tenant(evil).schedule("remind", oncely.every(minutes=5), key=f"k{evil}")
    cli.advance(minutes=5)
    cli.app.tick()
    for command in (["jobs"], ["history"], ["explain", f"k{evil}", "--tenant", evil]):
        done = cli.invoke(*command)
        assert done.code == 0, (command, done.stderr)
        assert "\x1b" not in done.stdout, command
        assert "\x07" not in done.stdout, command
        assert "\\x1b[2J" in done.stdout, (command, done.stdout)
