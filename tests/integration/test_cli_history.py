"""`oncely history`: occurrences newest first, filtered by key, status, time and tenant."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _cli_support import CliApp, forget, make_cli_app, one_error_line, parsed, run

import oncely
from oncely.cli.moment import parse_moment


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    value: str = request.getfixturevalue(name)
    return value


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> Iterator[CliApp]:
    made = make_cli_app(tmp_path, monkeypatch, url)
    populate(made)
    yield made
    forget(made)


def populate(cli: CliApp) -> None:
    """12:00 to 12:30: beat succeeds every 5 minutes, sync fails every 10, and tenant acme's
    remind:acme succeeds every 15."""
    app = cli.app
    app.tick()
    app.for_tenant("acme").schedule("remind", oncely.every(minutes=15), key="remind:acme")
    for _ in range(6):
        cli.advance(minutes=5)
        app.tick()
    app.close()


def scheduled(stdout: str) -> list[tuple[str, datetime]]:
    return [(d["key"], datetime.fromisoformat(d["scheduled_for"])) for d in parsed(stdout)]


def at(hour: int, minute: int) -> datetime:
    return datetime(2026, 3, 27, hour, minute, tzinfo=UTC)


def test_table_newest_first_one_line_each_in_80_columns(cli: CliApp) -> None:
    done = cli.invoke("history", "--limit", "5")
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "\x1b[" not in done.stdout
    assert " ".join(lines[0].split()) == "scheduled (UTC) key status tries tenant error or reason"
    rows = [line for line in lines if line.startswith("2026-")]
    times = [row.split()[0] for row in rows]
    assert len(rows) == 5
    assert times == sorted(times, reverse=True)
    assert times[:3] == ["2026-03-27T12:30:00Z"] * 3
    assert {row.split()[1] for row in rows[:3]} == {"beat", "remind:acme", "sync"}
    failed = next(row for row in rows if " sync " in row)
    assert failed.split()[2:4] == ["failed", "1"]  # status, tries
    assert "RuntimeError: up" in failed  # the exception's line, cut at 80 columns
    assert "Traceback" not in done.stdout
    assert "details follow" not in done.stdout
    assert failed.split()[4] == "-"  # no tenant; with one tenant or none, the worker instead
    one = cli.invoke("history", "sync").stdout.splitlines()
    assert one[0].split()[5] == "worker"
    assert "#" in one[2].split()[4]  # hostname#pid
    assert "acme" in next(row for row in rows if "remind:acme" in row)
    assert lines[-1] == "the newest 5 shown; a larger --limit shows more"


def test_json_has_every_field_the_whole_error_and_iso_datetimes(cli: CliApp) -> None:
    done = cli.invoke("history", "sync", "--json")
    assert done.code == 0, done.stderr
    documents = parsed(done.stdout)
    assert [d["scheduled_for"] for d in documents] == [
        "2026-03-27T12:30:00+00:00",
        "2026-03-27T12:20:00+00:00",
        "2026-03-27T12:10:00+00:00",
    ]
    newest = documents[0]
    assert newest["status"] == "failed"
    assert newest["attempts"] == 1
    assert newest["error"].startswith("Traceback (most recent call last):")
    assert "[details follow]" in newest["error"]
    assert datetime.fromisoformat(newest["started_at"]) == at(12, 30)
    assert datetime.fromisoformat(newest["finished_at"]) == at(12, 30)
    assert newest["worker"]
    assert newest["tenant"] is None
    assert cli.invoke("history", "nothing-has-this-key", "--json").code == 1


def test_status_and_key_filter(cli: CliApp) -> None:
    failed = scheduled(cli.invoke("history", "--status", "failed", "--json").stdout)
    assert failed == [("sync", at(12, 30)), ("sync", at(12, 20)), ("sync", at(12, 10))]
    beat = scheduled(cli.invoke("history", "beat", "--status", "succeeded", "--json").stdout)
    assert len(beat) == 6
    assert {key for key, _ in beat} == {"beat"}
    assert cli.invoke("history", "beat", "--status", "failed").stdout == "no occurrences match\n"


@pytest.mark.parametrize(
    "since",
    ["10m", "2026-03-27T12:20", "2026-03-27T12:20:00Z", "2026-03-27T14:20+02:00"],
)
def test_since_is_inclusive_as_a_duration_or_iso_naive_meaning_utc(cli: CliApp, since: str) -> None:
    assert cli.now() == at(12, 30)
    found = scheduled(cli.invoke("history", "--since", since, "--json").stdout)
    assert sorted(found) == [
        ("beat", at(12, 20)),
        ("beat", at(12, 25)),
        ("beat", at(12, 30)),
        ("remind:acme", at(12, 30)),
        ("sync", at(12, 20)),
        ("sync", at(12, 30)),
    ]


def test_until_is_exclusive_and_combines_with_since(cli: CliApp) -> None:
    found = scheduled(cli.invoke("history", "--since", "25m", "--until", "10m", "--json").stdout)
    assert sorted(found) == [
        ("beat", at(12, 5)),
        ("beat", at(12, 10)),
        ("beat", at(12, 15)),
        ("remind:acme", at(12, 15)),
        ("sync", at(12, 10)),
    ]
    whole_day = scheduled(cli.invoke("history", "--since", "2026-03-27", "--json").stdout)
    assert len(whole_day) == 6 + 3 + 2
    assert scheduled(cli.invoke("history", "--until", "2026-03-27", "--json").stdout) == []


def test_tenant_shows_only_that_tenants_occurrences(cli: CliApp) -> None:
    acme = parsed(cli.invoke("history", "--tenant", "acme", "--json").stdout)
    assert [(d["key"], d["tenant"]) for d in acme] == [("remind:acme", "acme")] * 2
    table = cli.invoke("history", "--tenant", "acme")
    assert "remind:acme" in table.stdout
    assert "beat" not in table.stdout
    assert "tenant" not in table.stdout.splitlines()[1]  # one tenant: no column for it
    assert parsed(cli.invoke("history", "--tenant", "globex", "--json").stdout) == []
    everyone = parsed(cli.invoke("history", "--json").stdout)
    assert {d["tenant"] for d in everyone} == {None, "acme"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "3x"], "'3x' is not a time; use an ISO date (2026-03-27)"),
        (["--until", "-5m"], "or a duration back from now: a whole number and m, h, d or w"),
        (["--since", "1.5h"], "(30m, 12h, 7d, 2w)"),
        (["--since", "99999999999w"], "'99999999999w' is not a time"),
        (["--since", "300000w"], "back from now is before year 1"),
        (["--since", "1h", "--until", "2h"], "is after --until 2026-03-27T10:30:00Z; swap them"),
        (["--status", "done"], "'done' is not one of 'pending', 'running', 'succeeded'"),
        (["--limit", "0"], "0 is not in the range x>=1"),
    ],
)
def test_a_bad_option_value_is_exit_2_in_one_line(
    cli: CliApp, args: list[str], message: str
) -> None:
    done = cli.invoke("history", *args)
    assert done.code == 2
    line = one_error_line(done)
    assert message in line
    assert line.endswith("(see 'oncely history --help')")


def test_help_says_naive_means_utc_and_lists_the_durations() -> None:
    text = " ".join(run("history", "--help").stdout.split())
    assert "--since TIME Only occurrences scheduled at or after this." in text
    assert "(naive means UTC), or a duration back from now: 30m, 12h, 7d, 2w." in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        (" 2W ", timedelta(weeks=2)),
        ("0m", timedelta(0)),
        ("2026-03-27", datetime(2026, 3, 27, tzinfo=UTC)),
        ("2026-03-27T09:30", datetime(2026, 3, 27, 9, 30, tzinfo=UTC)),
        ("2026-03-27 09:30:00-05:00", datetime(2026, 3, 27, 14, 30, tzinfo=UTC)),
        ("2026-03-27T09:30Z", datetime(2026, 3, 27, 9, 30, tzinfo=UTC)),
    ],
)
def test_parse_moment_reads_durations_and_iso(text: str, expected: object) -> None:
    assert parse_moment(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "m", "30", "30 minutes", "1h30m", "-1d", "1y", "27/03/2026", "0001-01-01T00:00+01:00"],
)
def test_parse_moment_refuses_other_forms_naming_the_accepted_ones(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a time; use an ISO date .* \(30m, 12h, 7d, 2w\)"):
        parse_moment(text)
