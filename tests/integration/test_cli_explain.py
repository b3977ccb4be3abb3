"""`oncely explain`: the app's explanation of one schedule, as its report or as JSON."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from _cli_support import CliApp, forget, make_cli_app, one_error_line, parsed

import oncely


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> Iterator[CliApp]:
    made = make_cli_app(tmp_path, monkeypatch, sqlite_url)
    made.app.tick()
    made.advance(minutes=10)
    made.app.tick()  # sync failed at 12:10
    made.app.for_tenant("acme").schedule("remind", oncely.every(hours=1), key="remind:acme")
    made.app.close()
    yield made
    forget(made)


def test_report_is_the_explanations_text(cli: CliApp) -> None:
    done = cli.invoke("explain", "sync", "-n", "2")
    assert done.code == 0, done.stderr
    assert done.stdout == str(cli.app.explain("sync", upcoming=2)) + "\n"
    assert done.stdout.startswith(
        "sync: job sync, every 10 minutes, active\nworkers: worker last seen 2026-03-27T12:10:00Z"
    )
    assert "failed" in done.stdout


def test_json_is_one_object_with_the_whole_story(cli: CliApp) -> None:
    done = cli.invoke("explain", "digest", "--json", "-n", "3", "--recent", "1")
    assert done.code == 0, done.stderr
    document = parsed(done.stdout)
    assert document["key"] == "digest"
    assert document["state"] == "active"
    assert document["trigger"] == "At 09:00 on Monday through Friday (Europe/Berlin)"
    assert [datetime.fromisoformat(u["local"]).isoformat() for u in document["upcoming"]] == [
        "2026-03-30T09:00:00+02:00",
        "2026-03-31T09:00:00+02:00",
        "2026-04-01T09:00:00+02:00",
    ]
    assert document["recent"] == []
    failed = parsed(cli.invoke("explain", "sync", "--json").stdout)["recent"][0]
    assert failed["status"] == "failed"
    assert "Traceback" in failed["error"]


def test_tenant_explains_the_tenants_schedule(cli: CliApp) -> None:
    done = cli.invoke("explain", "remind:acme", "--tenant", "acme")
    assert done.code == 0, done.stderr
    assert done.stdout.startswith("remind:acme (tenant 'acme'): job remind")
    missing = cli.invoke("explain", "remind:acme")
    assert missing.code == 1
    assert "pass --tenant acme" in one_error_line(missing)


def test_an_unknown_key_is_exit_1_in_one_line(cli: CliApp) -> None:
    done = cli.invoke("explain", "nope", "--json")
    assert done.code == 1
    assert one_error_line(done) == (
        f"Error: no schedule has key 'nope'; `oncely jobs {cli.spec}` lists the keys"
    )
