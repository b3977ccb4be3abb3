"""Strict and lenient postures: messages a person can act on, and a scheduler that never raises."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from oncely import (
    InvalidSchedule,
    OncelyError,
    at,
    cron,
    every,
    parse_cron,
    parse_rrule,
    rrule,
    validate_cron,
    validate_rrule,
)
from oncely.recurrence import Rule, Trigger

# (rule text, substrings the message must contain: the wrong part, and an example of a right one)
BAD_RULES: list[tuple[str, tuple[str, ...]]] = [
    ("FREQ=DAILY;BYHOUR=24", ("BYHOUR", "'24'", "0 to 23", "e.g. BYHOUR=9,17")),
    ("FREQ=DAILY;BYHOUR=-1", ("BYHOUR", "'-1'", "e.g. BYHOUR=")),
    ("FREQ=DAILY;BYMINUTE=60", ("BYMINUTE", "'60'", "e.g. BYMINUTE=")),
    ("FREQ=DAILY;BYSECOND=61", ("BYSECOND", "'61'", "e.g. BYSECOND=")),
    ("FREQ=DAILY;BYMONTH=13", ("BYMONTH", "'13'", "e.g. BYMONTH=")),
    ("FREQ=DAILY;BYMONTHDAY=0", ("BYMONTHDAY", "'0'", "e.g. BYMONTHDAY=")),
    ("FREQ=YEARLY;BYWEEKNO=54", ("BYWEEKNO", "'54'", "e.g. BYWEEKNO=")),
    ("FREQ=YEARLY;BYYEARDAY=367", ("BYYEARDAY", "'367'", "e.g. BYYEARDAY=")),
    ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=0", ("BYSETPOS", "'0'", "e.g. BYSETPOS=")),
    ("FREQ=FORTNIGHTLY", ("FREQ=FORTNIGHTLY", "WEEKLY", "DAILY")),
    ("BYHOUR=9", ("FREQ is missing", "FREQ=DAILY")),
    ("FREQ=DAILY;BYDAY=XX", ("BYDAY", "'XX'", "MO TU WE")),
    ("FREQ=WEEKLY;BYDAY=1MO", ("BYDAY", "'1MO'", "FREQ=MONTHLY", "BYDAY=MO")),
    ("FREQ=MONTHLY;BYDAY=6MO", ("BYDAY", "'6MO'", "e.g. BYDAY=2MO")),
    ("FREQ=YEARLY;BYDAY=54MO", ("BYDAY", "'54MO'", "e.g. BYDAY=")),
    ("FREQ=MONTHLY;BYDAY=1MO,TH", ("BYDAY=1MO,TH", "mixes", "BYDAY=1MO,1TH")),
    ("FREQ=DAILY;COUNT=0", ("COUNT=0", "e.g. COUNT=10")),
    ("FREQ=DAILY;COUNT=-3", ("COUNT=-3", "e.g. COUNT=10")),
    ("FREQ=DAILY;COUNT=100001", ("COUNT", "e.g. COUNT=10")),
    ("FREQ=DAILY;INTERVAL=abc", ("INTERVAL", "e.g. INTERVAL=2")),
    ("FREQ=DAILY;INTERVAL=0", ("INTERVAL=0", "e.g. INTERVAL=2")),
    ("FREQ=DAILY;UNTIL=2026-12-31", ("UNTIL=2026-12-31", "e.g. UNTIL=20261231T235959Z")),
    ("FREQ=DAILY;UNTIL=20260230", ("UNTIL=20260230", "not a real date", "e.g. UNTIL=")),
    ("FREQ=DAILY;UNTIL=20261231T250000Z", ("UNTIL=20261231T250000Z", "e.g. UNTIL=")),
    ("FREQ=DAILY;BYHOURS=9", ("BYHOURS", "did you mean BYHOUR")),
    ("FREQ=DAILY;COLOUR=RED", ("COLOUR", "FREQ")),
    ("FREQ=WEEKLY;BYMONTHDAY=1", ("BYMONTHDAY", "FREQ=WEEKLY", "YEARLY")),
    ("FREQ=MONTHLY;BYWEEKNO=1", ("BYWEEKNO", "FREQ=MONTHLY", "YEARLY")),
    ("FREQ=DAILY;BYYEARDAY=1", ("BYYEARDAY", "FREQ=DAILY", "YEARLY")),
    ("FREQ=DAILY;BYSETPOS=1", ("BYSETPOS", "e.g. FREQ=MONTHLY")),
    ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", ("BYMONTH", "BYMONTHDAY", "never", "e.g.")),
    ("FREQ=MONTHLY;BYMONTH=4,6;BYMONTHDAY=31", ("BYMONTHDAY", "never", "e.g.")),
    ("FREQ=DAILY;WKST=XX", ("WKST", "'XX'", "MO TU WE")),
    ("FREQ=DAILY;COUNT=5;UNTIL=20261231T000000Z", ("UNTIL", "COUNT", "not both")),
    (
        "FREQ=DAILY;UNTIL=20261231T000000Z;UNTIL=20270101T000000Z",
        ("UNTIL appears 2 times", "keep the earliest UNTIL"),
    ),
    ("FREQ=DAILY;FREQ=WEEKLY", ("FREQ appears 2 times", "keep one FREQ")),
    ("FREQ=DAILY;BYHOUR=9;BYHOUR=9", ("BYHOUR appears 2 times",)),
    ("FREQ=DAILY;BYHOUR", ("'BYHOUR' is not NAME=VALUE", "e.g. FREQ=")),
    ("FREQ=DAILY;BYHOUR=", ("BYHOUR has no value", "e.g. BYHOUR=")),
    ("", ("empty", "e.g. FREQ=")),
    ("   \n  ", ("empty", "e.g. FREQ=")),
    ("FREQ=DAILY\nEXDATE:20260101T000000Z", ("EXDATE is not supported",)),
    ("FREQ=DAILY\nRDATE:20260101T000000Z", ("RDATE is not supported",)),
    ("FREQ=DAILY\nFREQ=WEEKLY", ("2 rules", "e.g. FREQ=")),
    ("DTSTART:2026\nRRULE:FREQ=DAILY", ("DTSTART", "e.g.")),
    ("DTSTART;TZID=Europe/Paris:20260105T090000Z\nRRULE:FREQ=DAILY", ("TZID", "Z")),
    ("DTSTART:20260105T090000\nDTSTART:20260105T090000\nFREQ=DAILY", ("DTSTART appears twice",)),
    ("FREQ=" + "DAILY;" * 400, ("at most 2000", "e.g. FREQ=")),
]


@pytest.mark.parametrize(("text", "parts"), BAD_RULES, ids=[repr(t)[:50] for t, _ in BAD_RULES])
def test_strict_rule_errors_name_the_part_and_give_an_example(
    text: str, parts: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        validate_rrule(text)
    message = str(caught.value)
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    assert caught.value.reason
    assert caught.value.reason in message
    assert isinstance(caught.value, OncelyError)
    assert isinstance(caught.value, ValueError)
    # the same text is refused when building a trigger
    with pytest.raises(InvalidSchedule):
        rrule(text, start=datetime(2026, 1, 1))


# Strictly wrong, but with one safe reading that the lenient posture keeps.
LENIENT_KEEPS = {
    "FREQ=DAILY;COUNT=5;UNTIL=20261231T000000Z",
    "FREQ=DAILY;UNTIL=20261231T000000Z;UNTIL=20270101T000000Z",
    "FREQ=DAILY;BYHOUR=9;BYHOUR=9",
}


@pytest.mark.parametrize(("text", "parts"), BAD_RULES, ids=[repr(t)[:50] for t, _ in BAD_RULES])
def test_bad_rules_in_the_lenient_posture(text: str, parts: tuple[str, ...]) -> None:
    result = parse_rrule(text)
    if text in LENIENT_KEEPS:
        assert isinstance(result, Rule)
    else:
        assert result is None


@pytest.mark.parametrize(
    "text",
    [
        "FREQ=DAILY;BYHOUR=²",  # isdigit() but not a decimal digit
        "FREQ=DAILY;COUNT=²",
        "FREQ=DAILY;INTERVAL=¹",
        "FREQ=DAILY;BYMINUTE=①",
        "FREQ=MONTHLY;BYMONTHDAY=-³",
    ],
)
def test_strict_unicode_digits_raise_invalid_schedule(text: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        validate_rrule(text)
    assert "e.g." in str(caught.value)
    assert parse_rrule(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "FREQ=YEARLY;BYMONTH=12;BYDAY=8MO",  # the 8th Monday of December
        "FREQ=YEARLY;BYMONTH=6;BYDAY=20FR",
        "FREQ=YEARLY;BYMONTH=1,2;BYDAY=51SU",
    ],
)
def test_yearly_positions_past_the_end_of_the_months_are_refused_cleanly(text: str) -> None:
    """With BYMONTH a BYDAY position counts within the month (RFC 5545), so these never fire."""
    with pytest.raises(InvalidSchedule, match="BYDAY"):
        validate_rrule(text)
    with pytest.raises(InvalidSchedule, match="BYDAY"):
        rrule(text, start=datetime(2026, 1, 1))
    assert parse_rrule(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "FREQ=DAILY;UNTIL=00010101",
        "FREQ=DAILY;UNTIL=09991231T000000Z",
        "FREQ=DAILY;UNTIL=20261231T000000",
        "FREQ=WEEKLY;BYDAY=MO;COUNT=3",
    ],
)
def test_normal_form_reads_back_as_the_same_rule(text: str) -> None:
    """``Rule.text`` is what gets stored; it must be readable again."""
    rule = validate_rrule(text)
    assert validate_rrule(rule.text) == rule
    lenient = parse_rrule(text)
    assert lenient is not None
    assert parse_rrule(lenient.text) == lenient


def test_strict_refuses_other_decimal_digits_naming_the_part() -> None:
    # Arabic-Indic digits are decimal digits that int() reads; a rule is written in ASCII digits.
    text = "FREQ=DAILY;BYHOUR=٩"
    with pytest.raises(InvalidSchedule) as caught:
        validate_rrule(text)
    message = str(caught.value)
    assert "BYHOUR value '٩'" in message, message
    assert "e.g. BYHOUR=9,17" in message, message
    assert parse_rrule(text) is None


BAD_CRONS: list[tuple[str, tuple[str, ...]]] = [
    ("61 * * * *", ("minute field '61'", "0-59", "e.g.")),
    ("*/0 * * * *", ("minute field '*/0'", "e.g.")),
    ("* 24 * * *", ("hour field '24'", "0-23", "e.g.")),
    ("* * 32 * *", ("day-of-month field '32'", "1-31", "e.g.")),
    ("* * 0 * *", ("day-of-month field '0'", "e.g.")),
    ("0 0 30 2 *", ("day-of-month field '30'", "not 30 in FEB")),
    ("* * * 13 *", ("month field '13'", "JAN-DEC", "e.g.")),
    ("* * * FOO *", ("month field 'FOO'", "JAN-DEC")),
    ("* * * * 8", ("day-of-week field '8'", "SUN-SAT", "MON-FRI")),
    ("* * * * MON#6", ("day-of-week field 'MON#6'", "FRI#2")),
    ("60 * * * * *", ("second field '60'", "0-59", "e.g.")),
    ("* * * *", ("5 fields", "this one has 4", 'e.g. "0 9 * * MON-FRI"')),
    ("* * * * * * *", ("5 fields", "this one has 7", "e.g.")),
    ("", ("this one has 0", "e.g.")),
    ("@fortnightly", ("unknown cron alias", "@daily", "@hourly")),
    ("every day", ("this one has 2", "e.g.")),
]


@pytest.mark.parametrize(("expr", "parts"), BAD_CRONS, ids=[repr(e) for e, _ in BAD_CRONS])
def test_strict_cron_errors_name_the_field_and_give_an_example(
    expr: str, parts: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        validate_cron(expr)
    message = str(caught.value)
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    if expr:
        assert repr(expr) in message  # the expression itself is quoted back
    with pytest.raises(InvalidSchedule):
        cron(expr)
    assert parse_cron(expr) is None


@pytest.mark.parametrize(
    ("expr", "normal"),
    [
        ("0 9 * * MON-FRI", "0 9 * * MON-FRI"),
        ("  0   9 *  * MON-FRI ", "0 9 * * MON-FRI"),
        ("@daily", "0 0 * * *"),
        ("@HOURLY", "0 * * * *"),
        ("@weekly", "0 0 * * 0"),
        ("15 * * * * *", "15 * * * * *"),
    ],
)
def test_valid_cron_is_normalised(expr: str, normal: str) -> None:
    assert validate_cron(expr) == normal
    assert parse_cron(expr) == normal


def test_cron_alias_fires_like_its_expansion() -> None:
    t = datetime(2026, 5, 5, 5, 5, tzinfo=UTC)
    assert cron("@daily").next_after(t) == datetime(2026, 5, 6, tzinfo=UTC)
    assert cron("@daily") == cron("0 0 * * *")


def test_valid_rule_normal_form() -> None:
    rule = validate_rrule("rrule:freq=weekly; byday=mo,we ;byhour=9")
    assert rule.text == "FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9"
    assert rule.freq == "WEEKLY"
    assert rule.byday == ((None, 0), (None, 2))
    assert rule.byhour == (9,)
    assert not rule.bounded
    assert validate_rrule("FREQ=DAILY;COUNT=2").bounded


# --- zones ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("zone", ["Mars/Olympus", "Europe/Berln", "", " ", "../../etc/passwd"])
def test_unknown_zone(zone: str) -> None:
    with pytest.raises(InvalidSchedule, match="zone"):
        cron("0 9 * * *", zone)
    with pytest.raises(InvalidSchedule, match="zone"):
        rrule("FREQ=DAILY", start=datetime(2026, 1, 1), tz=zone or "Nope/Nope")


def test_unknown_zone_in_dtstart() -> None:
    with pytest.raises(InvalidSchedule, match="zone"):
        rrule("DTSTART;TZID=Nope/Zone:20260105T090000\nRRULE:FREQ=DAILY")


def test_zone_given_twice_and_different() -> None:
    text = "DTSTART;TZID=Europe/Paris:20260105T090000\nRRULE:FREQ=DAILY"
    with pytest.raises(InvalidSchedule, match="zone"):
        rrule(text, tz="Europe/Berlin")
    assert rrule(text, tz="Europe/Paris").zone.name == "Europe/Paris"


def test_start_given_twice() -> None:
    with pytest.raises(InvalidSchedule, match="start"):
        rrule("DTSTART:20260105T080000Z\nRRULE:FREQ=DAILY", start=datetime(2026, 1, 5))


def test_dtstart_line_sets_start_and_zone() -> None:
    trigger = rrule("DTSTART;TZID=Europe/Paris:20260105T090000\nRRULE:FREQ=DAILY;COUNT=2")
    assert list(
        trigger.between(datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    ) == [
        datetime(2026, 1, 5, 8, 0, tzinfo=UTC),
        datetime(2026, 1, 6, 8, 0, tzinfo=UTC),
    ]
    trigger = rrule("DTSTART:20260105T080000Z\nRRULE:FREQ=DAILY;COUNT=1", tz="Europe/Paris")
    assert trigger.next_after(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(
        2026, 1, 5, 8, 0, tzinfo=UTC
    )


def test_a_rule_without_start_cannot_answer_until_given_one() -> None:
    trigger = rrule("FREQ=DAILY;BYHOUR=9")
    with pytest.raises(InvalidSchedule, match="start"):
        trigger.next_after(datetime(2026, 1, 1, tzinfo=UTC))
    started = trigger.with_start(datetime(2026, 1, 1, tzinfo=UTC))
    assert started.next_after(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(
        2026, 1, 1, 9, 0, tzinfo=UTC
    )


def test_triggers_built_alike_are_equal() -> None:
    start = datetime(2026, 1, 5, 9, 0)
    a = rrule("FREQ=WEEKLY;BYDAY=MO", start=start, tz="Europe/Paris")
    b = rrule("freq=weekly;byday=mo", start=start, tz="Europe/Paris")
    assert a == b
    assert hash(a) == hash(b)
    assert a != rrule("FREQ=WEEKLY;BYDAY=MO", start=start, tz="Europe/Berlin")
    assert a != rrule("FREQ=WEEKLY;BYDAY=MO", start=start, tz="Europe/Paris", dst_fold="both")
    assert cron("0 9 * * 1", "Europe/Paris") == cron("0  9 * * 1", "Europe/Paris")
    assert cron("0 9 * * 1", "Europe/Paris") != cron("0 9 * * 1", "Europe/Berlin")
    assert cron("0 9 * * 1") != every(hours=1)


def test_with_start_keeps_the_definition() -> None:
    unstarted = rrule(
        "FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
        tz="Europe/Berlin",
        dst_gap="skip",
        dst_fold="both",
        schedule="k",
        max_span=None,
    )
    started = unstarted.with_start(datetime(2026, 3, 1))
    assert (started.dst_gap, started.dst_fold, started.schedule, started.max_span) == (
        "skip",
        "both",
        "k",
        None,
    )
    # skip: no firing on the Berlin gap day
    assert list(
        started.between(
            datetime(2026, 3, 28, 12, tzinfo=UTC), datetime(2026, 3, 30, 12, tzinfo=UTC)
        )
    ) == [datetime(2026, 3, 30, 0, 30, tzinfo=UTC)]
    assert started.with_start(datetime(2027, 1, 1)) is started


def test_a_rule_that_never_fires_is_invalid() -> None:
    with pytest.raises(InvalidSchedule, match="never"):
        rrule("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=6", start=datetime(2026, 1, 1))


# --- naive datetimes -----------------------------------------------------------------------------

NAIVE = datetime(2026, 1, 1, 12, 0)
AWARE = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def triggers() -> list[Trigger]:
    return [
        cron("0 9 * * *", "Europe/Berlin"),
        every(minutes=7),
        rrule("FREQ=DAILY;BYHOUR=9", start=datetime(2026, 1, 1), tz="Europe/Berlin"),
        at(datetime(2026, 6, 1, tzinfo=UTC)),
    ]


@pytest.mark.parametrize("trigger", triggers(), ids=repr)
def test_naive_datetimes_are_refused(trigger: Trigger) -> None:
    with pytest.raises(InvalidSchedule, match="time zone") as caught:
        trigger.next_after(NAIVE)
    assert "e.g." in str(caught.value)
    with pytest.raises(InvalidSchedule):
        trigger.next_instance_after(NAIVE)
    with pytest.raises(InvalidSchedule):
        next(trigger.instances_after(NAIVE))
    with pytest.raises(InvalidSchedule):
        list(trigger.between(NAIVE, AWARE))
    with pytest.raises(InvalidSchedule):
        list(trigger.between(AWARE, NAIVE))
    with pytest.raises(InvalidSchedule):
        list(trigger.instances_between(NAIVE, AWARE))


def test_at_refuses_naive() -> None:
    with pytest.raises(InvalidSchedule, match="time zone"):
        at(NAIVE)


def test_at_fires_once() -> None:
    when = datetime(2026, 6, 1, 12, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    trigger = at(when)
    assert trigger.next_after(datetime(2026, 6, 1, 9, 59, 59, tzinfo=UTC)) == datetime(
        2026, 6, 1, 10, 0, tzinfo=UTC
    )
    assert trigger.next_after(datetime(2026, 6, 1, 10, 0, tzinfo=UTC)) is None
    assert list(trigger.between(AWARE, datetime(2027, 1, 1, tzinfo=UTC))) == [
        datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
    ]
    assert at(when) == at(when.astimezone(UTC))


def test_rrule_refuses_naive_end() -> None:
    with pytest.raises(InvalidSchedule, match="end"):
        rrule("FREQ=DAILY", start=datetime(2026, 1, 1), end=datetime(2026, 2, 1))


def test_rrule_reads_a_naive_start_as_wall_time_in_its_zone() -> None:
    trigger = rrule("FREQ=DAILY;COUNT=1", start=datetime(2026, 1, 5, 9, 0), tz="Asia/Tokyo")
    assert trigger.next_after(datetime(2026, 1, 1, tzinfo=UTC)) == datetime(
        2026, 1, 5, 0, 0, tzinfo=UTC
    )


# --- lenient: None and one WARNING per distinct text ---------------------------------------------


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.name == "oncely.recurrence" and r.levelno == logging.WARNING
    ]


def test_parse_rrule_warns_once_per_distinct_text(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely.recurrence")
    marker = uuid.uuid4().hex[:8].upper()
    bad = f"FREQ=DAILY;BYHOUR=99;X{marker}=1"
    assert parse_rrule(bad) is None
    records = warnings_of(caplog)
    assert len(records) == 1
    assert marker in records[0].getMessage()
    assert parse_rrule(bad) is None
    assert parse_rrule(bad) is None
    assert len(warnings_of(caplog)) == 1
    other = f"FREQ=SOMETIMES;X{marker}=2"
    assert parse_rrule(other) is None
    assert len(warnings_of(caplog)) == 2
    assert "FREQ=SOMETIMES" in warnings_of(caplog)[1].getMessage()
    assert parse_rrule("FREQ=DAILY;BYHOUR=9") is not None
    assert len(warnings_of(caplog)) == 2
    assert [r for r in caplog.records if r.levelno > logging.WARNING] == []


def test_parse_cron_warns_once_per_distinct_text(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely.recurrence")
    minute = 60 + int(uuid.uuid4().int % 10_000)
    bad = f"{minute} * * * *"
    assert parse_cron(bad) is None
    records = warnings_of(caplog)
    assert len(records) == 1
    assert repr(bad) in records[0].getMessage()
    assert "minute" in records[0].getMessage()
    assert parse_cron(bad) is None
    assert len(warnings_of(caplog)) == 1
    assert parse_cron(f"{minute} * * *") is None
    assert len(warnings_of(caplog)) == 2
    assert parse_cron("0 9 * * *") == "0 9 * * *"
    assert len(warnings_of(caplog)) == 2


@pytest.mark.parametrize(
    "value", [None, 5, 5.5, b"FREQ=DAILY", ["FREQ=DAILY"], {"FREQ": "DAILY"}, object()]
)
def test_lenient_parsing_of_non_text_returns_none(
    value: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely.recurrence")
    assert parse_rrule(value) is None  # type: ignore[arg-type]
    assert parse_cron(value) is None  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule, match="text"):
        validate_rrule(value)  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule, match="text"):
        validate_cron(value)  # type: ignore[arg-type]


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    __str__ = __repr__


def test_lenient_parsing_never_raises_even_on_an_unprintable_object() -> None:
    assert parse_rrule(_Unprintable()) is None  # type: ignore[arg-type]
    assert parse_cron(_Unprintable()) is None  # type: ignore[arg-type]
