"""`oncely trigger`, `oncely pause`, `oncely resume`: one schedule changed, one line said."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _cli_support import CliApp, forget, make_cli_app, one_error_line, run

import oncely


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> Iterator[CliApp]:
    made = make_cli_app(tmp_path, monkeypatch, sqlite_url)
    made.app.tick()
    made.app.for_tenant("acme").schedule("remind", oncely.every(hours=1), key="remind:acme")
    made.app.close()
    yield made
    forget(made)


def test_trigger_adds_an_occurrence_due_now(cli: CliApp) -> None:
    done = cli.invoke("trigger", "beat")
    assert done.code == 0, done.stderr
    assert done.stdout == (
        "triggered 'beat': due at 2026-03-27T12:00:00Z, the next worker tick runs it\n"
    )
    (occurrence,) = cli.app.history("beat")
    assert (occurrence.origin, occurrence.status) == ("trigger", "pending")
    again = cli.invoke("trigger", "beat")
    assert (
        again.stdout == "'beat' already has an occurrence at 2026-03-27T12:00:00Z; nothing added\n"
    )


def test_trigger_of_a_paused_schedule_says_it_waits_for_resume(cli: CliApp) -> None:
    cli.app.pause("beat")
    done = cli.invoke("trigger", "beat")
    assert done.stdout == (
        "triggered 'beat' at 2026-03-27T12:00:00Z, but it is paused: it runs once resumed\n"
    )


def test_pause_and_resume_say_what_happened(cli: CliApp) -> None:
    paused = cli.invoke("pause", "beat")
    assert paused.code == 0, paused.stderr
    assert paused.stdout == "paused 'beat': it does not fire until `oncely resume`\n"
    assert {s.key: s.paused for s in cli.app.schedules()}["beat"] is True
    resumed = cli.invoke("resume", "beat")
    assert resumed.stdout == "resumed 'beat': next run 2026-03-27T12:05:00Z\n"
    assert {s.key: s.paused for s in cli.app.schedules()}["beat"] is False
    cli.invoke("pause", "beat")
    cli.advance(minutes=20)
    late = cli.invoke("resume", "beat")
    assert late.stdout == (
        "resumed 'beat': due since 2026-03-27T12:05:00Z; the job's misfire policy decides "
        "what of the missed time runs\n"
    )


def test_pause_until_a_time_says_when_it_resumes_and_it_does(cli: CliApp) -> None:
    paused = cli.invoke("pause", "beat", "--until", "2026-03-27T12:30")
    assert paused.code == 0, paused.stderr
    assert paused.stdout == (
        "paused 'beat' until 2026-03-27T12:30:00Z: it resumes by itself then\n"
    )
    cli.advance(minutes=30)
    cli.app.tick()
    assert {s.key: s.paused for s in cli.app.schedules()}["beat"] is False


def test_pause_until_a_duration_counts_ahead_and_has_json(cli: CliApp) -> None:
    done = cli.invoke("pause", "beat", "--until", "2h", "--json")
    assert json.loads(done.stdout) == {
        "key": "beat", "tenant": None, "paused": True,
        "paused_until": "2026-03-27T14:00:00+00:00", "changed": True,
    }  # fmt: skip
    again = json.loads(cli.invoke("pause", "beat", "--json").stdout)
    assert (again["paused_until"], again["changed"]) == (None, True)


@pytest.mark.parametrize(
    ("until", "message"),
    [
        ("2026-03-27T11:00", "2026-03-27T11:00:00Z is not in the future (now is 2026-03-27T12"),
        ("next tuesday", "'next tuesday' is not a time"),
    ],
)
def test_a_pause_until_no_future_time_is_exit_2_naming_it(
    cli: CliApp, until: str, message: str
) -> None:
    done = cli.invoke("pause", "beat", "--until", until)
    assert done.code == 2
    assert message in one_error_line(done)
    assert "--until" in one_error_line(done)
    assert {s.key: s.paused for s in cli.app.schedules()}["beat"] is False


def test_tenant_selects_the_tenants_schedule(cli: CliApp) -> None:
    done = cli.invoke("pause", "remind:acme", "--tenant", "acme")
    assert done.stdout == (
        "paused 'remind:acme' (tenant 'acme'): it does not fire until `oncely resume`\n"
    )
    assert [s.paused for s in cli.app.for_tenant("acme").schedules()] == [True]
    triggered = cli.invoke("trigger", "remind:acme", "--tenant", "acme")
    assert "triggered 'remind:acme' (tenant 'acme') at" in triggered.stdout
    assert [o.origin for o in cli.app.for_tenant("acme").history()] == ["trigger"]


@pytest.mark.parametrize("command", ["trigger", "pause", "resume"])
def test_an_unknown_key_is_exit_1_naming_it_and_the_listing(cli: CliApp, command: str) -> None:
    done = cli.invoke(command, "nope")
    assert done.code == 1
    assert one_error_line(done) == (
        f"Error: no schedule has key 'nope'; `oncely jobs {cli.spec}` lists the keys"
    )


def test_a_key_of_another_tenant_says_which_tenant_to_pass(cli: CliApp) -> None:
    done = cli.invoke("trigger", "remind:acme")
    assert done.code == 1
    assert one_error_line(done) == (
        "Error: no schedule has key 'remind:acme' (tenant 'acme' has one: pass --tenant acme); "
        f"`oncely jobs {cli.spec}` lists the keys"
    )
    cli.app.for_tenant("globex").schedule("remind", oncely.every(hours=2), key="remind:acme")
    both = one_error_line(cli.invoke("pause", "remind:acme"))
    assert "(tenant 'acme' has one: pass --tenant acme, or another of 'acme', 'globex')" in both
    wrong = one_error_line(cli.invoke("resume", "beat", "--tenant", "acme"))
    assert wrong.startswith(
        "Error: no schedule has key 'beat' in tenant 'acme' (it has one outside any tenant: "
        "leave out --tenant)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["trigger"], "Missing argument 'MODULE:APP'."),
        (["pause", "svc:app"], "Missing argument 'KEY'."),
        (["resume", "svc:app", "beat", "--tenant", ""], "a tenant name is a non-empty string"),
        (["trigger", "svc", "beat"], "'svc' is not MODULE:APP"),
    ],
)
def test_usage_errors_are_exit_2_in_one_line(args: list[str], message: str) -> None:
    done = run(*args)
    assert done.code == 2
    line = one_error_line(done)
    assert message in line
    assert line.endswith(f"(see 'oncely {args[0]} --help')")
