"""`oncely backfill`: a past range's occurrences, each created once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _cli_support import CliApp, forget, make_cli_app, one_error_line

import oncely


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> Iterator[CliApp]:
    made = make_cli_app(tmp_path, monkeypatch, sqlite_url)
    made.app.tick()
    made.app.for_tenant("acme").schedule("remind", oncely.every(hours=1), key="remind:acme")
    made.app.close()
    yield made
    forget(made)


def test_backfill_creates_each_occurrence_once(cli: CliApp) -> None:
    done = cli.invoke("backfill", "beat", "--since", "2026-03-27T11:00", "--until", "30m")
    assert done.code == 0, done.stderr
    assert done.stdout == (
        "backfilled 'beat' from 2026-03-27T11:00:00Z to 2026-03-27T11:30:00Z: "
        "7 occurrences created or re-armed\n"
    )
    assert [o.origin for o in cli.app.history("beat")] == ["backfill"] * 7
    again = cli.invoke("backfill", "beat", "--since", "1h", "--until", "2026-03-27T11:30Z")
    assert again.stdout.endswith(": 0 occurrences created or re-armed\n")


def test_tenant_backfills_the_tenants_schedule(cli: CliApp) -> None:
    done = cli.invoke(
        "backfill", "remind:acme", "--tenant", "acme", "--since", "3h", "--until", "1h"
    )
    assert done.stdout.endswith(
        "(tenant 'acme') from 2026-03-27T09:00:00Z to 2026-03-27T11:00:00Z: "
        "3 occurrences created or re-armed\n"
    )
    assert len(cli.app.for_tenant("acme").history()) == 3
    assert cli.invoke("backfill", "remind:acme", "--since", "3h", "--until", "1h").code == 1


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nope", "--since", "1h", "--until", "0m"], 1, "no schedule has key 'nope'; `oncely jobs"),
        (["beat", "--since", "1h", "--until", "2026-04-01"], 1, "is in the future"),
        (["beat", "--since", "1h", "--until", "2h"], 2, "is after --until"),
        (["beat", "--until", "1h"], 2, "Missing option '--since'"),
        (["beat", "--since", "yesterday", "--until", "1h"], 2, "'yesterday' is not a time"),
    ],
)
def test_errors_are_one_line_with_their_exit_code(
    cli: CliApp, args: list[str], code: int, message: str
) -> None:
    done = cli.invoke("backfill", *args)
    assert done.code == code
    assert message in one_error_line(done)
