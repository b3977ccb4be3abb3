"""How a series ends: UNTIL, COUNT, end and max_span, and which one wins."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from dateutil import rrule as du

from oncely import InvalidSchedule, parse_rrule, rrule, validate_rrule
from oncely.recurrence import DEFAULT_MAX_SPAN, RRule
from oncely.recurrence.rfc5545 import Until


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def everything(trigger: RRule, after: str = "1990-01-01T00:00:00Z") -> list[datetime]:
    """All instants of a bounded trigger (guarded against running away)."""
    found = []
    for instance in trigger.instances_after(utc(after)):
        found.append(instance.at)
        assert len(found) <= 5000, "the series did not stop"
    return found


# --- UNTIL / COUNT / end precedence ---------------------------------------------------------------

START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
DAILY_9 = "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0"


def days(first: int, last: int) -> list[datetime]:
    """09:00Z on 2026-01-<first> .. 2026-01-<last>."""
    return [datetime(2026, 1, d, 9, 0, tzinfo=UTC) for d in range(first, last + 1)]


@pytest.mark.parametrize("end", ["2026-01-05T12:00:00Z", "2026-03-01T00:00:00Z"])
def test_until_beats_end(end: str) -> None:
    trigger = rrule(f"{DAILY_9};UNTIL=20260110T090000Z", start=START, end=utc(end))
    assert everything(trigger) == days(1, 10)


@pytest.mark.parametrize("end", ["2026-01-02T12:00:00Z", "2026-03-01T00:00:00Z"])
def test_count_beats_end(end: str) -> None:
    trigger = rrule(f"{DAILY_9};COUNT=5", start=START, end=utc(end))
    assert everything(trigger) == days(1, 5)


def test_end_applies_when_the_rule_has_neither_until_nor_count() -> None:
    trigger = rrule(DAILY_9, start=START, end=utc("2026-01-07T12:00:00Z"))
    assert everything(trigger) == days(1, 7)
    assert trigger.next_after(utc("2026-01-07T09:00:00Z")) is None
    assert trigger.next_after(utc("2027-01-01T00:00:00Z")) is None


def test_end_is_inclusive_like_until() -> None:
    trigger = rrule(DAILY_9, start=START, end=utc("2026-01-07T09:00:00Z"))
    assert everything(trigger) == days(1, 7)


def test_until_is_inclusive() -> None:
    trigger = rrule(f"{DAILY_9};UNTIL=20260107T090000Z", start=START)
    assert everything(trigger) == days(1, 7)
    trigger = rrule(f"{DAILY_9};UNTIL=20260107T085959Z", start=START)
    assert everything(trigger) == days(1, 6)


def test_date_only_until_includes_the_whole_local_day() -> None:
    trigger = rrule(
        "FREQ=HOURLY;UNTIL=20260105", start=datetime(2026, 1, 5, 20, 0), tz="Europe/Berlin"
    )
    # 20:00 .. 23:00 Berlin (CET, +01:00)
    assert everything(trigger) == [
        utc("2026-01-05T19:00:00Z"),
        utc("2026-01-05T20:00:00Z"),
        utc("2026-01-05T21:00:00Z"),
        utc("2026-01-05T22:00:00Z"),
    ]
    trigger = rrule(
        "FREQ=DAILY;BYHOUR=23;BYMINUTE=59;BYSECOND=59;UNTIL=20260107",
        start=datetime(2026, 1, 5),
        tz="America/New_York",
    )
    assert everything(trigger) == [
        utc("2026-01-06T04:59:59Z"),
        utc("2026-01-07T04:59:59Z"),
        utc("2026-01-08T04:59:59Z"),  # 2026-01-07 23:59:59 EST
    ]


def test_local_until_is_a_wall_time_in_the_zone() -> None:
    # 09:00 in New York is 14:00Z in January; read as UTC, 09:00 would exclude the 7th.
    rule = "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0;UNTIL=20260107T090000"
    trigger = rrule(rule, start=datetime(2026, 1, 5), tz="America/New_York")
    assert everything(trigger) == [
        utc("2026-01-05T14:00:00Z"),
        utc("2026-01-06T14:00:00Z"),
        utc("2026-01-07T14:00:00Z"),
    ]
    rule = "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0;UNTIL=20260107T085959"
    trigger = rrule(rule, start=datetime(2026, 1, 5), tz="America/New_York")
    assert everything(trigger)[-1] == utc("2026-01-06T14:00:00Z")


def test_utc_until_is_an_instant_whatever_the_zone() -> None:
    rule = "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0;UNTIL=20260107T140000Z"
    trigger = rrule(rule, start=datetime(2026, 1, 5), tz="America/New_York")
    assert everything(trigger)[-1] == utc("2026-01-07T14:00:00Z")
    rule = "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0;UNTIL=20260107T135959Z"
    trigger = rrule(rule, start=datetime(2026, 1, 5), tz="America/New_York")
    assert everything(trigger)[-1] == utc("2026-01-06T14:00:00Z")


def test_local_until_in_the_fold_includes_the_second_pass() -> None:
    trigger = rrule(
        "FREQ=MINUTELY;INTERVAL=30;UNTIL=20261025T023000",
        start=datetime(2026, 10, 25, 1, 0),
        tz="Europe/Berlin",
        dst_fold="both",
    )
    assert everything(trigger, "2026-10-24T00:00:00Z") == [
        utc("2026-10-24T23:00:00Z"),  # 01:00 CEST
        utc("2026-10-24T23:30:00Z"),
        utc("2026-10-25T00:00:00Z"),  # 02:00 CEST
        utc("2026-10-25T00:30:00Z"),  # 02:30 CEST
        utc("2026-10-25T01:00:00Z"),  # 02:00 CET
        utc("2026-10-25T01:30:00Z"),  # 02:30 CET: the UNTIL wall time, second pass
    ]


@pytest.mark.parametrize(
    "until", ["UNTIL=20251231T235959Z", "UNTIL=20251231", "UNTIL=20260101T085959"]
)
def test_until_before_start_is_invalid(until: str) -> None:
    with pytest.raises(InvalidSchedule, match="UNTIL") as caught:
        rrule(f"{DAILY_9};{until}", start=datetime(2026, 1, 1, 9, 0))
    assert "start" in str(caught.value)


def test_until_on_the_start_fires_once() -> None:
    trigger = rrule(f"{DAILY_9};UNTIL=20260101T090000Z", start=START)
    assert everything(trigger) == [START]


# --- COUNT and ordinals ---------------------------------------------------------------------------


def test_count_rules_carry_ordinals_and_stop() -> None:
    trigger = rrule(f"{DAILY_9};COUNT=5", start=START)
    found = list(trigger.instances_after(utc("2025-12-01T00:00:00Z")))
    assert [(i.at, i.ordinal) for i in found] == list(zip(days(1, 5), [1, 2, 3, 4, 5], strict=True))
    assert trigger.next_after(utc("2026-01-05T09:00:00Z")) is None
    # from the middle, the ordinal is the position in the whole series
    third = trigger.next_instance_after(utc("2026-01-02T09:00:00Z"))
    assert third is not None
    assert (third.at, third.ordinal) == (utc("2026-01-03T09:00:00Z"), 3)


def test_count_rule_still_answers_after_being_walked_to_its_end() -> None:
    trigger = rrule(f"{DAILY_9};COUNT=5", start=START)
    assert len(list(trigger.instances_after(utc("2025-12-01T00:00:00Z")))) == 5
    # walking the whole series once must not make earlier questions come back empty
    assert trigger.next_after(utc("2026-01-02T09:00:00Z")) == utc("2026-01-03T09:00:00Z")
    assert trigger.next_after(utc("2025-12-31T00:00:00Z")) == utc("2026-01-01T09:00:00Z")
    assert list(trigger.between(utc("2026-01-03T09:00:00Z"), utc("2027-01-01T00:00:00Z"))) == (
        days(4, 5)
    )


def test_rules_without_count_have_no_ordinal() -> None:
    trigger = rrule(DAILY_9, start=START)
    instance = trigger.next_instance_after(START)
    assert instance is not None
    assert instance.ordinal is None


def test_the_900th_of_a_1000_count_daily_rule() -> None:
    trigger = rrule("FREQ=DAILY;COUNT=1000", start=datetime(2020, 1, 1, 9, 0), tz="Europe/Berlin")
    # 899 days after 2020-01-01 is 2022-06-18 (CEST, +02:00)
    instance = trigger.next_instance_after(utc("2022-06-18T06:59:59Z"))
    assert instance is not None
    assert instance.at == utc("2022-06-18T07:00:00Z")
    assert instance.wall == datetime(2022, 6, 18, 9, 0)
    assert instance.ordinal == 900
    # the last is the 1000th, 999 days after the start; nothing after it
    last = trigger.next_instance_after(utc("2022-09-26T06:00:00Z"))
    assert last is not None
    assert (last.at, last.ordinal) == (utc("2022-09-26T07:00:00Z"), 1000)
    assert trigger.next_after(last.at) is None
    assert trigger.next_after(utc("2030-01-01T00:00:00Z")) is None
    assert list(trigger.between(last.at, utc("2040-01-01T00:00:00Z"))) == []


def test_count_queries_out_of_order_agree_with_dateutil() -> None:
    text = "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=8,17;BYMINUTE=15;COUNT=1000"
    start = datetime(2019, 3, 4, 8, 15)
    expected = list(du.rrulestr(text, dtstart=start))
    assert len(expected) == 1000
    trigger = rrule(text, start=start, tz="UTC")
    # far first, then back, then across checkpoints (every 256), repeatedly
    for ordinal in (900, 10, 1000, 257, 256, 255, 513, 999, 1, 512, 768, 769, 900, 1, 1000):
        before = expected[ordinal - 1] - timedelta(seconds=1)
        instance = trigger.next_instance_after(before.replace(tzinfo=UTC))
        assert instance is not None, ordinal
        assert instance.wall == expected[ordinal - 1]
        assert instance.at == expected[ordinal - 1].replace(tzinfo=UTC)
        assert instance.ordinal == ordinal
    assert trigger.next_after(expected[-1].replace(tzinfo=UTC)) is None
    # a window in the middle: ordinals run on
    window = list(
        trigger.instances_between(
            expected[600].replace(tzinfo=UTC), expected[620].replace(tzinfo=UTC)
        )
    )
    assert [i.ordinal for i in window] == list(range(602, 622))
    assert [i.wall for i in window] == expected[601:621]


def test_every_ordinal_of_a_count_rule_in_a_dst_zone() -> None:
    text = "FREQ=DAILY;BYHOUR=2;BYMINUTE=30;COUNT=600"
    start = datetime(2025, 12, 1)
    expected_walls = list(du.rrulestr(text, dtstart=start))
    trigger = rrule(text, start=start, tz="Europe/Berlin")
    found = list(trigger.instances_after(utc("2025-11-01T00:00:00Z")))
    # one firing per wall time (shifted in the gaps, the first pass in the folds)
    assert [i.nominal for i in found] == expected_walls
    assert [i.ordinal for i in found] == list(range(1, 601))
    # fresh trigger, chained queries: the same ordinals
    fresh = rrule(text, start=start, tz="Europe/Berlin")
    for expected in [*reversed(found[::37]), *found[::41]]:
        assert fresh.next_instance_after(expected.at - timedelta(seconds=1)) == expected
    assert fresh.next_after(found[-1].at) is None


# --- duplicate UNTIL: strict vs lenient, and never adding one -------------------------------------


def test_strict_rejects_a_second_until() -> None:
    with pytest.raises(InvalidSchedule, match="UNTIL") as caught:
        validate_rrule("FREQ=DAILY;UNTIL=20260110T000000Z;UNTIL=20260105T000000Z")
    assert "UNTIL appears 2 times" in str(caught.value)
    assert "earliest UNTIL" in str(caught.value)
    with pytest.raises(InvalidSchedule, match="UNTIL"):
        rrule("FREQ=DAILY;UNTIL=20260110T000000Z;UNTIL=20260110T000000Z", start=START)


@pytest.mark.parametrize(
    "text",
    [
        "FREQ=DAILY;BYHOUR=9;UNTIL=20260110T235959Z;UNTIL=20260105T235959Z",
        "FREQ=DAILY;BYHOUR=9;UNTIL=20260105T235959Z;UNTIL=20260110T235959Z",
        "FREQ=DAILY;UNTIL=20260110T235959Z;BYHOUR=9;UNTIL=20260105T235959Z;UNTIL=20260107T235959Z",
    ],
)
def test_lenient_keeps_the_earliest_until(text: str) -> None:
    rule = parse_rrule(text)
    assert rule is not None
    assert rule.untils == (Until(datetime(2026, 1, 5, 23, 59, 59), utc=True),)
    assert rule.text.count("UNTIL") == 1
    assert "UNTIL=20260105T235959Z" in rule.text
    assert "20260110" not in rule.text
    trigger = rrule(rule, start=datetime(2026, 1, 1))
    assert everything(trigger) == days(1, 5)


def test_lenient_duplicate_until_text_form() -> None:
    rule = parse_rrule("FREQ=DAILY;UNTIL=20260110T000000Z;BYHOUR=9;UNTIL=20260105T000000Z")
    assert rule is not None
    assert rule.text == "FREQ=DAILY;UNTIL=20260105T000000Z;BYHOUR=9"


def test_lenient_duplicate_until_of_mixed_kinds_stops_at_the_earliest() -> None:
    rule = parse_rrule("FREQ=HOURLY;UNTIL=20260110;UNTIL=20260105T120000Z")
    assert rule is not None
    # Of two kinds neither is the earlier before a zone reads them: both kept, none added.
    assert rule.text == "FREQ=HOURLY;UNTIL=20260110;UNTIL=20260105T120000Z"
    assert len(rule.untils) == 2
    trigger = rrule(rule, start=datetime(2026, 1, 5, 10, 0), tz="Europe/Berlin")
    assert everything(trigger)[-1] == utc("2026-01-05T12:00:00Z")
    rule = parse_rrule("FREQ=HOURLY;UNTIL=20260105;UNTIL=20260110T120000Z")
    assert rule is not None
    trigger = rrule(rule, start=datetime(2026, 1, 5, 10, 0), tz="Europe/Berlin")
    assert everything(trigger)[-1] == utc("2026-01-05T22:00:00Z")  # 23:00 Berlin


def test_lenient_never_adds_an_until() -> None:
    for text in ("FREQ=DAILY", "FREQ=WEEKLY;BYDAY=MO", "FREQ=DAILY;COUNT=3"):
        rule = parse_rrule(text)
        assert rule is not None
        assert rule.untils == ()
        assert rule.text == text
        trigger = rrule(rule, start=START, end=utc("2026-01-03T00:00:00Z"))
        assert trigger.rule.untils == ()
        assert "UNTIL" not in trigger.rule.text
        assert trigger.rule.text == text
        trigger = rrule(text, start=START, end=utc("2026-01-03T00:00:00Z"))
        assert "UNTIL" not in trigger.rule.text
        assert trigger.rule.text == text
        assert trigger.with_start(START).rule.text == text


def test_rule_with_until_keeps_exactly_its_own_until_after_end() -> None:
    trigger = rrule(
        "FREQ=DAILY;UNTIL=20260110T000000Z", start=START, end=utc("2026-01-03T00:00:00Z")
    )
    assert trigger.rule.text == "FREQ=DAILY;UNTIL=20260110T000000Z"


@pytest.mark.parametrize(
    ("text", "last"),
    [
        # COUNT ends first
        ("FREQ=DAILY;BYHOUR=9;COUNT=3;UNTIL=20260110T235959Z", "2026-01-03T09:00:00Z"),
        # UNTIL ends first
        ("FREQ=DAILY;BYHOUR=9;COUNT=30;UNTIL=20260104T235959Z", "2026-01-04T09:00:00Z"),
        ("FREQ=DAILY;BYHOUR=9;UNTIL=20260104T235959Z;COUNT=30", "2026-01-04T09:00:00Z"),
    ],
)
def test_until_with_count_lenient_stops_first_strict_rejects(text: str, last: str) -> None:
    with pytest.raises(InvalidSchedule, match="UNTIL and COUNT"):
        validate_rrule(text)
    with pytest.raises(InvalidSchedule, match="UNTIL and COUNT"):
        rrule(text, start=START)
    rule = parse_rrule(text)
    assert rule is not None
    # both kept as written: whichever ends first ends the series
    assert f";COUNT={rule.count};" in f";{text};"
    assert rule.untils[0].value.strftime("UNTIL=%Y%m%dT%H%M%SZ") in text
    assert len(rule.untils) == 1
    trigger = rrule(rule, start=datetime(2026, 1, 1))
    found = everything(trigger)
    assert found[0] == utc("2026-01-01T09:00:00Z")
    assert found[-1] == utc(last)
    assert len(found) == utc(last).day


def test_lenient_duplicate_count_keeps_the_smallest() -> None:
    rule = parse_rrule("FREQ=DAILY;COUNT=5;COUNT=3")
    assert rule is not None
    assert rule.count == 3
    assert rule.text == "FREQ=DAILY;COUNT=3"
    with pytest.raises(InvalidSchedule, match="COUNT appears 2 times"):
        validate_rrule("FREQ=DAILY;COUNT=5;COUNT=3")


# --- max_span ------------------------------------------------------------------------------------


def span_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.name == "oncely.recurrence" and r.levelno == logging.ERROR
    ]


def test_max_span_stops_after_366_days_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely.recurrence")
    assert timedelta(days=366) == DEFAULT_MAX_SPAN
    start = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)
    text = "FREQ=DAILY;BYHOUR=12;BYMINUTE=0;BYSECOND=0"
    trigger = rrule(text, start=start, schedule="remind:user42")
    # inside the span: fires, and nothing is logged
    assert trigger.next_after(utc("2027-02-01T12:00:00Z")) == utc("2027-02-02T12:00:00Z")
    assert span_records(caplog) == []
    # start + 366 days = 2027-02-03T09:00Z: the 2027-02-03 12:00 firing is past it
    assert trigger.next_after(utc("2027-02-02T12:00:00Z")) is None
    records = span_records(caplog)
    assert len(records) == 1
    message = records[0].getMessage()
    assert text in message
    assert "remind:user42" in message
    assert "max_span" in message
    # the same stop again: still None, not logged again
    assert trigger.next_after(utc("2027-02-02T12:00:00Z")) is None
    assert trigger.next_after(utc("2030-01-01T00:00:00Z")) is None
    found = list(trigger.between(start - timedelta(seconds=1), utc("2030-01-01T00:00:00Z")))
    assert found[0] == utc("2026-02-02T12:00:00Z")
    assert found[-1] == utc("2027-02-02T12:00:00Z")
    assert len(found) == 366
    assert len(span_records(caplog)) == 1


def test_max_span_in_a_zone_logs_the_schedule(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely.recurrence")
    text = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0"
    trigger = rrule(
        text, start=datetime(2026, 3, 2, 9, 0), tz="Europe/Paris", schedule="remind:user42"
    )
    # 2026-03-02 + 366 days = 2027-03-03; the last Monday before is 2027-03-01 (CET)
    assert trigger.next_after(utc("2027-02-28T00:00:00Z")) == utc("2027-03-01T08:00:00Z")
    assert trigger.next_after(utc("2027-03-01T08:00:00Z")) is None
    records = span_records(caplog)
    assert len(records) == 1
    assert text in records[0].getMessage()
    assert "remind:user42" in records[0].getMessage()


def test_max_span_custom(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely.recurrence")
    start = datetime(2026, 4, 1, 6, 0, tzinfo=UTC)
    trigger = rrule(
        "FREQ=DAILY;BYHOUR=6", start=start, max_span=timedelta(days=10), schedule="custom:span"
    )
    found = list(trigger.between(start - timedelta(seconds=1), utc("2027-01-01T00:00:00Z")))
    assert found == [datetime(2026, 4, d, 6, 0, tzinfo=UTC) for d in range(1, 12)]
    assert len(span_records(caplog)) == 1


def test_max_span_none_is_perpetual(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely.recurrence")
    start = datetime(2026, 5, 3, 7, 0, tzinfo=UTC)
    trigger = rrule("FREQ=DAILY;BYHOUR=7", start=start, max_span=None, schedule="forever")
    assert trigger.next_after(utc("2036-05-03T07:00:00Z")) == utc("2036-05-04T07:00:00Z")
    assert trigger.next_after(utc("2099-12-31T08:00:00Z")) == utc("2100-01-01T07:00:00Z")
    assert span_records(caplog) == []


def test_end_means_no_max_span_stop(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely.recurrence")
    start = datetime(2026, 6, 4, 7, 0, tzinfo=UTC)
    end = utc("2028-06-04T07:00:00Z")
    trigger = rrule("FREQ=DAILY;BYHOUR=7", start=start, end=end, schedule="with:end")
    assert trigger.next_after(utc("2027-12-01T00:00:00Z")) == utc("2027-12-01T07:00:00Z")
    assert trigger.next_after(end - timedelta(seconds=1)) == end
    assert trigger.next_after(end) is None
    assert span_records(caplog) == []


@pytest.mark.parametrize(
    "bound", ["UNTIL=20290101T000000Z", "UNTIL=20290101", "COUNT=1000", "UNTIL=20290101T000000"]
)
def test_own_bound_beyond_max_span_is_authoritative(
    bound: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely.recurrence")
    start = datetime(2026, 7, 5, 7, 0, tzinfo=UTC)
    trigger = rrule(f"FREQ=DAILY;BYHOUR=7;{bound}", start=start, schedule="own:bound")
    assert trigger.next_after(utc("2028-01-01T00:00:00Z")) == utc("2028-01-01T07:00:00Z")
    assert span_records(caplog) == []


def test_max_span_must_be_positive() -> None:
    with pytest.raises(InvalidSchedule, match="max_span"):
        rrule("FREQ=DAILY", start=START, max_span=timedelta(0))
    with pytest.raises(InvalidSchedule, match="max_span"):
        rrule("FREQ=DAILY", start=START, max_span=timedelta(days=-1))
