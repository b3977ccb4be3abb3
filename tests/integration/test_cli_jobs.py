"""`oncely jobs`: every schedule and the jobs nothing schedules, as a table and as JSON."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from _cli_support import CliApp, forget, make_cli_app, one_error_line, parsed, run

import oncely


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    value: str = request.getfixturevalue(name)
    return value


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> Iterator[CliApp]:
    made = make_cli_app(tmp_path, monkeypatch, url)
    yield made
    forget(made)


def populate(cli: CliApp) -> None:
    app = cli.app
    app.tick()  # saves the code-declared schedules: digest, sync, beat
    app.for_tenant("acme").schedule("remind", oncely.every(hours=6), key="remind:acme")
    app.schedule("remind", oncely.every(hours=1), key="remind:ops")
    app.pause("remind:ops")
    app.close()


def test_table_lists_schedules_then_unscheduled_jobs_in_80_columns(cli: CliApp) -> None:
    populate(cli)
    done = cli.invoke("jobs")
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "\x1b[" not in done.stdout  # no colour when the output is not a terminal
    text = done.stdout
    assert lines[0].split() == ["key", "job", "next", "run", "(UTC)", "state", "tenant", "trigger"]

    def row(key: str) -> list[str]:
        return next(line for line in lines if line.startswith(key + " ")).split()

    assert row("digest")[:5] == ["digest", "digest", "2026-03-30T07:00:00Z", "active", "-"]
    assert row("digest")[5:7] == ["At", "09:00"]  # 09:00 Berlin, summer time; cut at 80
    assert row("beat")[2:] == ["2026-03-27T12:05:00Z", "active", "-", "every", "5", "minutes"]
    assert row("remind:ops")[1:] == [
        "remind",
        "2026-03-27T13:00:00Z",
        "paused",
        "-",
        "every",
        "hour",
    ]
    assert row("remind:acme")[3:] == ["active", "acme", "every", "6", "hours"]
    assert row("-")[:2] == ["-", "export"]
    assert text.count("no sche") == 1  # remind has schedules; export has none


def test_json_is_one_array_with_iso_datetimes_and_nothing_else(cli: CliApp) -> None:
    populate(cli)
    done = cli.invoke("jobs", "--json")
    assert done.code == 0, done.stderr
    documents = parsed(done.stdout)
    by_key = {d["key"]: d for d in documents if d["key"] is not None}
    assert set(by_key) == {"digest", "sync", "beat", "remind:ops", "remind:acme"}
    digest = by_key["digest"]
    assert datetime.fromisoformat(digest["next_run_at"]) == datetime.fromisoformat(
        "2026-03-30T09:00:00+02:00"
    )
    assert digest["trigger"] == "At 09:00 on Monday through Friday (Europe/Berlin)"
    assert digest["trigger_spec"]["kind"] == "cron"
    assert digest["origin"] == "code"
    assert by_key["remind:ops"]["paused"] is True
    assert by_key["remind:ops"]["status"] == "active"
    assert by_key["remind:acme"]["tenant"] == "acme"
    (idle,) = [d for d in documents if d["key"] is None]
    assert idle["job"] == "export"
    assert idle["status"] == "no schedule"


def test_tenant_lists_only_that_tenants_schedules(cli: CliApp) -> None:
    populate(cli)
    cli.app.for_tenant("globex").schedule("export", oncely.every(days=1), key="export:globex")
    done = cli.invoke("jobs", "--tenant", "acme", "--json")
    assert done.code == 0, done.stderr
    documents = parsed(done.stdout)
    assert [(d["key"], d["tenant"]) for d in documents if d["key"]] == [("remind:acme", "acme")]
    # export has no schedule in acme; code-triggered jobs are not any tenant's
    assert [d["job"] for d in documents if d["key"] is None] == ["export"]
    table = cli.invoke("jobs", "--tenant", "acme")
    assert "remind:acme" in table.stdout
    assert "globex" not in table.stdout
    assert "remind:ops" not in table.stdout
    assert "tenant" not in table.stdout.splitlines()[1]  # one tenant: no column for it
    globex = parsed(cli.invoke("jobs", "--tenant", "globex", "--json").stdout)
    assert [d["job"] for d in globex if d["key"] is None] == ["remind"]


def test_code_triggers_no_worker_has_saved_are_listed_as_no_schedule(cli: CliApp) -> None:
    done = cli.invoke("jobs", "--json")
    assert done.code == 0, done.stderr
    documents = parsed(done.stdout)
    assert {d["job"]: d["status"] for d in documents} == dict.fromkeys(
        ["beat", "digest", "export", "remind", "sync"], "no schedule"
    )
    triggers = {d["job"]: d["trigger"] for d in documents}
    assert triggers["beat"] == "every 5 minutes"
    assert triggers["digest"] == "At 09:00 on Monday through Friday (Europe/Berlin)"
    assert triggers["remind"] is None
    table = cli.invoke("jobs")
    assert "At 09:00 on Monday" in table.stdout


def test_a_stored_payload_too_deep_to_read_is_listed_as_invalid(cli: CliApp) -> None:
    populate(cli)
    app = cli.app
    marker = "?" if app.store.dialect == "sqlite" else "%s"
    cast = "" if app.store.dialect == "sqlite" else "::jsonb"
    with app.store.transaction() as connection:
        connection.execute(
            f"UPDATE oncely_schedules SET payload = {marker}{cast} WHERE key = {marker}",
            ("[" * 1300 + "]" * 1300, "remind:acme"),
        )
    app.close()
    # RecursionError made `oncely jobs` fail for every tenant.
    done = cli.invoke("jobs", "--json")
    assert done.code == 0, done.stderr
    statuses = {d["key"]: d["status"] for d in parsed(done.stdout) if d["key"]}
    assert statuses["remind:acme"] == "invalid", statuses
    assert statuses["remind:ops"] != "invalid", statuses


def test_the_app_is_closed_after_the_command_and_after_an_error(cli: CliApp) -> None:
    before = cli.closed
    assert cli.invoke("jobs").code == 0
    assert cli.closed == before + 1
    assert cli.invoke("pause", "no-such-key").code == 1
    assert cli.closed == before + 2


def test_a_store_that_cannot_be_opened_is_exit_1_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "oncely.db"
    cli = make_cli_app(tmp_path, monkeypatch, f"sqlite:///{missing}")
    try:
        done = cli.invoke("jobs")
        assert done.code == 1
        assert "cannot open SQLite database" in one_error_line(done)
        assert cli.closed == 1
    finally:
        forget(cli)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("service", "'service' is not MODULE:APP; e.g. myservice.tasks:app"),
        ("nowhere:app", "cannot import module 'nowhere'"),
    ],
)
def test_a_bad_app_spec_is_exit_2_in_one_line(spec: str, message: str) -> None:
    done = run("jobs", spec)
    assert done.code == 2
    line = one_error_line(done)
    assert message in line
    assert line.endswith("(see 'oncely jobs --help')")


def test_an_empty_tenant_is_a_usage_error(cli: CliApp) -> None:
    done = cli.invoke("jobs", "--tenant", " ")
    assert done.code == 2
    assert "a tenant name is a non-empty string" in one_error_line(done)


def test_jobs_lists_one_page_and_names_the_next(cli: CliApp) -> None:
    populate(cli)
    first = cli.invoke("jobs", "--limit", "2", "--json")
    assert first.code == 0, first.stderr
    keys = [d["key"] for d in parsed(first.stdout)]
    assert len(keys) == 2  # a full page: the jobs nothing schedules come on the last one
    table = cli.invoke("jobs", "--limit", "2")
    assert table.stdout.splitlines()[-1].startswith("2 schedules shown; the next page: --after ")
    after = table.stdout.splitlines()[-1].split("--after ", 1)[1].split()
    rest = cli.invoke("jobs", "--after", after[0], *after[1:], "--json")
    later = [d["key"] for d in parsed(rest.stdout) if d["key"] is not None]
    assert not set(later) & set(keys)
    everything = [d["key"] for d in parsed(cli.invoke("jobs", "--json").stdout)]
    assert keys + later == [k for k in everything if k is not None]


def test_jobs_filters_by_job_state_and_prefix(cli: CliApp) -> None:
    populate(cli)
    by_job = parsed(cli.invoke("jobs", "--job", "remind", "--json").stdout)
    assert {d["job"] for d in by_job} == {"remind"}
    assert {d["key"] for d in by_job} == {"remind:acme", "remind:ops"}
    by_prefix = parsed(cli.invoke("jobs", "--prefix", "remind:o", "--json").stdout)
    assert [d["key"] for d in by_prefix] == ["remind:ops"]
