"""`oncely preview` through click, in-process."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from oncely.cli import main


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["preview", *args])
    return result.exit_code, result.stdout, result.stderr


def test_cron_lists_local_and_utc_and_marks_the_dst_gap() -> None:
    code, out, _ = run("30 2 * * *", "--tz", "Europe/Berlin", "--start", "2026-03-27T00:00:00")
    assert code == 0
    lines = out.splitlines()
    assert "At 02:30 every day" in lines[0]
    assert "Fri 2026-03-27 02:30:00 CET    +01:00   2026-03-27 01:30:00Z" in lines[1]
    assert "Sun 2026-03-29 03:00:00 CEST   +02:00   2026-03-29 01:00:00Z" in lines[3]
    assert "DST gap: 02:30 does not exist" in lines[3]
    assert "clocks go from 02:00 to 03:00" in lines[2]


def test_rrule_with_start_marks_the_fold() -> None:
    code, out, _ = run(
        "FREQ=DAILY;BYHOUR=1;BYMINUTE=30",
        "--tz",
        "America/New_York",
        "--start",
        "2026-10-31T00:00:00",
        "-n",
        "3",
    )
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 4
    assert "Sun 2026-11-01 01:30:00 EDT    -04:00   2026-11-01 05:30:00Z" in lines[2]
    assert "happens twice" in lines[2]
    assert "Mon 2026-11-02 01:30:00 EST    -05:00   2026-11-02 06:30:00Z" in lines[3]


def test_dtstart_line_in_the_rule_sets_zone_and_start() -> None:
    text = "DTSTART;TZID=Australia/Lord_Howe:20261002T021500\nRRULE:FREQ=DAILY;COUNT=3"
    code, out, _ = run(text, "--start", "2026-10-01T00:00:00Z")
    assert code == 0, out
    lines = out.splitlines()
    assert len(lines) == 4
    assert "Sun 2026-10-04 02:30:00" in lines[3]


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("FREQ=DAILY;UNTIL=20260101T000000Z;UNTIL=20250101T000000Z", "UNTIL appears 2 times"),
        ("61 * * * *", "the minute field '61' is not valid"),
        ("FREQ=FORTNIGHTLY", "FREQ=FORTNIGHTLY is not a frequency"),
    ],
)
def test_a_bad_rule_prints_the_strict_error_and_exits_2(rule: str, message: str) -> None:
    code, out, err = run(rule)
    assert code == 2
    assert out == ""
    assert err.startswith("error: ")
    assert message in err


def test_unknown_zone_exits_2() -> None:
    code, _, err = run("0 9 * * *", "--tz", "Mars/Olympus")
    assert code == 2
    assert "unknown time zone 'Mars/Olympus'" in err


def test_preview_of_a_counted_rule_without_a_start_lists_every_occurrence() -> None:
    code, out, _ = run("FREQ=DAILY;COUNT=3", "-n", "10")
    assert code == 0
    listed = [line for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [line.split()[0] for line in listed] == ["1", "2", "3"]
