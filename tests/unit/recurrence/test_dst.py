"""Daylight saving: gap and fold policies for cron and RRULE, with exact instants.

Transitions used (2026):

- Europe/Berlin: 2026-03-29 02:00 -> 03:00 at 01:00Z; 2026-10-25 03:00 -> 02:00 at 01:00Z.
- America/New_York: 2026-03-08 02:00 -> 03:00 at 07:00Z; 2026-11-01 02:00 -> 01:00 at 06:00Z.
- Australia/Lord_Howe (+10:30 / +11:00): 2026-10-04 02:00 -> 02:30 at 2026-10-03T15:30Z;
  2026-04-05 02:00 -> 01:30 at 2026-04-04T15:00Z.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from oncely.recurrence import Instance, Trigger, cron, rrule


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def daily(kind: str, zone: str, hour: int, minute: int, **policies: str) -> Trigger:
    """The same daily wall time as a cron expression or as an RRULE."""
    if kind == "cron":
        return cron(f"{minute} {hour} * * *", zone, **policies)  # type: ignore[arg-type]
    return rrule(
        f"FREQ=DAILY;BYHOUR={hour};BYMINUTE={minute};BYSECOND=0",
        start=datetime(2026, 1, 1),
        tz=zone,
        max_span=None,
        **policies,  # type: ignore[arg-type]
    )


def sub_hourly(kind: str, zone: str, minutes: str, **policies: str) -> Trigger:
    if kind == "cron":
        return cron(f"{minutes} * * * *", zone, **policies)  # type: ignore[arg-type]
    return rrule(
        f"FREQ=HOURLY;BYMINUTE={minutes};BYSECOND=0",
        start=datetime(2026, 1, 1),
        tz=zone,
        max_span=None,
        **policies,  # type: ignore[arg-type]
    )


KINDS = ("cron", "rrule")


def check(
    instance: Instance,
    zone: str,
    at: str,
    wall: datetime,
    *,
    fold: int = 0,
    dst: str | None = None,
    nominal: datetime | None = None,
) -> None:
    """Assert every field of ``instance``."""
    assert instance.at == utc(at)
    assert instance.at.tzinfo is UTC
    assert instance.wall == wall
    assert instance.fold == fold
    assert instance.tz == zone
    assert instance.dst == dst
    assert instance.nominal == (wall if nominal is None else nominal)
    local = instance.local
    assert local.tzinfo == ZoneInfo(zone)
    assert local.replace(tzinfo=None) == wall
    assert local.fold == fold
    assert local.astimezone(UTC) == utc(at)


# --- the gap (clocks jump forward) ---------------------------------------------------------------


@dataclass(frozen=True)
class Gap:
    zone: str
    hour: int
    minute: int
    before: str  # the day before, regular
    shifted: str  # the transition instant: where the skipped wall time fires under "shift"
    shifted_wall: datetime
    nominal: datetime
    after: str  # the day after, regular


GAPS = [
    Gap(
        "Europe/Berlin",
        2,
        30,
        "2026-03-28T01:30:00Z",
        "2026-03-29T01:00:00Z",
        datetime(2026, 3, 29, 3, 0),
        datetime(2026, 3, 29, 2, 30),
        "2026-03-30T00:30:00Z",
    ),
    Gap(
        "America/New_York",
        2,
        30,
        "2026-03-07T07:30:00Z",
        "2026-03-08T07:00:00Z",
        datetime(2026, 3, 8, 3, 0),
        datetime(2026, 3, 8, 2, 30),
        "2026-03-09T06:30:00Z",
    ),
    Gap(
        "Australia/Lord_Howe",
        2,
        15,
        "2026-10-02T15:45:00Z",
        "2026-10-03T15:30:00Z",
        datetime(2026, 10, 4, 2, 30),
        datetime(2026, 10, 4, 2, 15),
        "2026-10-04T15:15:00Z",
    ),
]
GAP_IDS = [g.zone for g in GAPS]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gap", GAPS, ids=GAP_IDS)
def test_gap_shift_fires_at_the_transition_instant(kind: str, gap: Gap) -> None:
    trigger = daily(kind, gap.zone, gap.hour, gap.minute, dst_gap="shift")
    found = list(trigger.instances_between(utc(gap.before) - timedelta(minutes=1), utc(gap.after)))
    assert len(found) == 3
    day_before = gap.nominal - timedelta(days=1)
    day_after = gap.nominal + timedelta(days=1)
    check(found[0], gap.zone, gap.before, day_before)
    check(
        found[1],
        gap.zone,
        gap.shifted,
        gap.shifted_wall,
        dst="gap-shifted",
        nominal=gap.nominal,
    )
    check(found[2], gap.zone, gap.after, day_after)
    # next_after agrees, from just before the gap and from the shifted instant itself
    assert trigger.next_after(utc(gap.shifted) - timedelta(seconds=1)) == utc(gap.shifted)
    assert trigger.next_after(utc(gap.shifted)) == utc(gap.after)
    assert trigger.next_after(utc(gap.before)) == utc(gap.shifted)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gap", GAPS, ids=GAP_IDS)
def test_gap_shift_is_the_default(kind: str, gap: Gap) -> None:
    trigger = daily(kind, gap.zone, gap.hour, gap.minute)
    instance = trigger.next_instance_after(utc(gap.before))
    assert instance is not None
    check(
        instance,
        gap.zone,
        gap.shifted,
        gap.shifted_wall,
        dst="gap-shifted",
        nominal=gap.nominal,
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gap", GAPS, ids=GAP_IDS)
def test_gap_skip_does_not_fire_that_day(kind: str, gap: Gap) -> None:
    trigger = daily(kind, gap.zone, gap.hour, gap.minute, dst_gap="skip")
    found = list(trigger.instances_between(utc(gap.before) - timedelta(minutes=1), utc(gap.after)))
    assert [i.at for i in found] == [utc(gap.before), utc(gap.after)]
    assert all(i.dst is None for i in found)
    check(found[1], gap.zone, gap.after, gap.nominal + timedelta(days=1))
    assert trigger.next_after(utc(gap.before)) == utc(gap.after)
    assert trigger.next_after(utc(gap.shifted) - timedelta(seconds=1)) == utc(gap.after)


@dataclass(frozen=True)
class Coincide:
    zone: str
    kind_minutes: str  # cron minute field / BYMINUTE
    after: str
    expected: tuple[tuple[str, datetime], ...]  # (instant, wall)


COINCIDE = [
    # Berlin hourly on 2026-03-29: 02:00 shifts to 03:00, the same instant as the regular 03:00.
    Coincide(
        "Europe/Berlin",
        "0",
        "2026-03-28T23:30:00Z",
        (
            ("2026-03-29T00:00:00Z", datetime(2026, 3, 29, 1, 0)),
            ("2026-03-29T01:00:00Z", datetime(2026, 3, 29, 3, 0)),
            ("2026-03-29T02:00:00Z", datetime(2026, 3, 29, 4, 0)),
        ),
    ),
    Coincide(
        "America/New_York",
        "0",
        "2026-03-08T05:30:00Z",
        (
            ("2026-03-08T06:00:00Z", datetime(2026, 3, 8, 1, 0)),
            ("2026-03-08T07:00:00Z", datetime(2026, 3, 8, 3, 0)),
            ("2026-03-08T08:00:00Z", datetime(2026, 3, 8, 4, 0)),
        ),
    ),
    # Lord Howe half-hourly on 2026-10-04: 02:00 shifts to 02:30, the regular 02:30.
    Coincide(
        "Australia/Lord_Howe",
        "0,30",
        "2026-10-03T14:45:00Z",
        (
            ("2026-10-03T15:00:00Z", datetime(2026, 10, 4, 1, 30)),
            ("2026-10-03T15:30:00Z", datetime(2026, 10, 4, 2, 30)),
            ("2026-10-03T16:00:00Z", datetime(2026, 10, 4, 3, 0)),
        ),
    ),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("policy", ["shift", "skip"])
@pytest.mark.parametrize("case", COINCIDE, ids=[c.zone for c in COINCIDE])
def test_shifted_gap_time_that_lands_on_a_regular_time_fires_once(
    kind: str, policy: str, case: Coincide
) -> None:
    trigger = sub_hourly(kind, case.zone, case.kind_minutes, dst_gap=policy)
    last = utc(case.expected[-1][0])
    found = list(trigger.instances_between(utc(case.after), last))
    assert len(found) == len(case.expected)
    for instance, (at, wall) in zip(found, case.expected, strict=True):
        # the coinciding instant fires as the regular time: no DST note, nominal == wall
        check(instance, case.zone, at, wall)
    # chaining next_after passes through the same instants, once each
    chained = []
    t = utc(case.after)
    for _ in case.expected:
        nxt = trigger.next_after(t)
        assert nxt is not None
        chained.append(nxt)
        t = nxt
    assert chained == [utc(at) for at, _ in case.expected]


@pytest.mark.parametrize("kind", KINDS)
def test_two_skipped_wall_times_shift_to_one_firing(kind: str) -> None:
    if kind == "cron":
        trigger: Trigger = cron("15,45 2 * * *", "Europe/Berlin")
    else:
        trigger = rrule(
            "FREQ=DAILY;BYHOUR=2;BYMINUTE=15,45;BYSECOND=0",
            start=datetime(2026, 3, 1),
            tz="Europe/Berlin",
        )
    found = list(
        trigger.instances_between(utc("2026-03-28T23:00:00Z"), utc("2026-03-29T23:00:00Z"))
    )
    assert len(found) == 1
    check(
        found[0],
        "Europe/Berlin",
        "2026-03-29T01:00:00Z",
        datetime(2026, 3, 29, 3, 0),
        dst="gap-shifted",
        nominal=datetime(2026, 3, 29, 2, 15),
    )
    assert trigger.next_after(utc("2026-03-29T01:00:00Z")) == utc("2026-03-30T00:15:00Z")


@pytest.mark.parametrize(
    ("policy", "first"),
    [("shift", "2026-03-29T01:00:00Z"), ("skip", "2026-03-30T00:30:00Z")],
)
def test_rrule_start_inside_the_gap(policy: str, first: str) -> None:
    trigger = rrule(
        "FREQ=DAILY", start=datetime(2026, 3, 29, 2, 30), tz="Europe/Berlin", dst_gap=policy
    )  # type: ignore[arg-type]
    assert trigger.next_after(utc("2026-03-01T00:00:00Z")) == utc(first)


# --- the fold (clocks fall back) -----------------------------------------------------------------


@dataclass(frozen=True)
class Fold:
    zone: str
    hour: int
    minute: int
    before: str
    first: str
    second: str
    after: str
    wall: datetime  # the repeated wall time


FOLDS = [
    Fold(
        "Europe/Berlin",
        2,
        30,
        "2026-10-24T00:30:00Z",
        "2026-10-25T00:30:00Z",
        "2026-10-25T01:30:00Z",
        "2026-10-26T01:30:00Z",
        datetime(2026, 10, 25, 2, 30),
    ),
    Fold(
        "America/New_York",
        1,
        30,
        "2026-10-31T05:30:00Z",
        "2026-11-01T05:30:00Z",
        "2026-11-01T06:30:00Z",
        "2026-11-02T06:30:00Z",
        datetime(2026, 11, 1, 1, 30),
    ),
    Fold(
        "Australia/Lord_Howe",
        1,
        45,
        "2026-04-03T14:45:00Z",
        "2026-04-04T14:45:00Z",
        "2026-04-04T15:15:00Z",
        "2026-04-05T15:15:00Z",
        datetime(2026, 4, 5, 1, 45),
    ),
]
FOLD_IDS = [f.zone for f in FOLDS]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fold", FOLDS, ids=FOLD_IDS)
def test_fold_first_fires_once_at_the_first_instance(kind: str, fold: Fold) -> None:
    trigger = daily(kind, fold.zone, fold.hour, fold.minute, dst_fold="first")
    found = list(
        trigger.instances_between(utc(fold.before) - timedelta(minutes=1), utc(fold.after))
    )
    assert len(found) == 3
    check(found[0], fold.zone, fold.before, fold.wall - timedelta(days=1))
    check(found[1], fold.zone, fold.first, fold.wall, fold=0, dst="fold-first")
    check(found[2], fold.zone, fold.after, fold.wall + timedelta(days=1))
    assert trigger.next_after(utc(fold.first)) == utc(fold.after)
    assert trigger.next_after(utc(fold.second) - timedelta(seconds=1)) == utc(fold.after)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fold", FOLDS, ids=FOLD_IDS)
def test_fold_first_is_the_default(kind: str, fold: Fold) -> None:
    trigger = daily(kind, fold.zone, fold.hour, fold.minute)
    assert list(trigger.between(utc(fold.before), utc(fold.after))) == [
        utc(fold.first),
        utc(fold.after),
    ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fold", FOLDS, ids=FOLD_IDS)
def test_fold_both_fires_at_each_instance(kind: str, fold: Fold) -> None:
    trigger = daily(kind, fold.zone, fold.hour, fold.minute, dst_fold="both")
    found = list(
        trigger.instances_between(utc(fold.before) - timedelta(minutes=1), utc(fold.after))
    )
    assert len(found) == 4
    check(found[0], fold.zone, fold.before, fold.wall - timedelta(days=1))
    check(found[1], fold.zone, fold.first, fold.wall, fold=0, dst="fold-first")
    check(found[2], fold.zone, fold.second, fold.wall, fold=1, dst="fold-second")
    check(found[3], fold.zone, fold.after, fold.wall + timedelta(days=1))
    # from inside the fold, the second instance is next
    assert trigger.next_after(utc(fold.first)) == utc(fold.second)
    assert trigger.next_after(utc(fold.second) - timedelta(microseconds=1)) == utc(fold.second)
    second = trigger.next_instance_after(utc(fold.first) + timedelta(seconds=1))
    assert second is not None
    check(second, fold.zone, fold.second, fold.wall, fold=1, dst="fold-second")
    assert trigger.next_after(utc(fold.second)) == utc(fold.after)


Row = tuple[str, datetime, int, str | None]

BOTH_ACROSS_THE_REPEATED_HOUR: list[tuple[str, str, str, list[Row]]] = [
    (
        "Europe/Berlin",
        "0,30",
        "2026-10-24T23:15:00Z",
        [
            ("2026-10-24T23:30:00Z", datetime(2026, 10, 25, 1, 30), 0, None),
            ("2026-10-25T00:00:00Z", datetime(2026, 10, 25, 2, 0), 0, "fold-first"),
            ("2026-10-25T00:30:00Z", datetime(2026, 10, 25, 2, 30), 0, "fold-first"),
            ("2026-10-25T01:00:00Z", datetime(2026, 10, 25, 2, 0), 1, "fold-second"),
            ("2026-10-25T01:30:00Z", datetime(2026, 10, 25, 2, 30), 1, "fold-second"),
            ("2026-10-25T02:00:00Z", datetime(2026, 10, 25, 3, 0), 0, None),
            ("2026-10-25T02:30:00Z", datetime(2026, 10, 25, 3, 30), 0, None),
        ],
    ),
    (
        "America/New_York",
        "0,30",
        "2026-11-01T04:15:00Z",
        [
            ("2026-11-01T04:30:00Z", datetime(2026, 11, 1, 0, 30), 0, None),
            ("2026-11-01T05:00:00Z", datetime(2026, 11, 1, 1, 0), 0, "fold-first"),
            ("2026-11-01T05:30:00Z", datetime(2026, 11, 1, 1, 30), 0, "fold-first"),
            ("2026-11-01T06:00:00Z", datetime(2026, 11, 1, 1, 0), 1, "fold-second"),
            ("2026-11-01T06:30:00Z", datetime(2026, 11, 1, 1, 30), 1, "fold-second"),
            ("2026-11-01T07:00:00Z", datetime(2026, 11, 1, 2, 0), 0, None),
            ("2026-11-01T07:30:00Z", datetime(2026, 11, 1, 2, 30), 0, None),
        ],
    ),
    (
        # the repeated half hour is 01:30-01:59
        "Australia/Lord_Howe",
        "0,15,30,45",
        "2026-04-04T14:05:00Z",
        [
            ("2026-04-04T14:15:00Z", datetime(2026, 4, 5, 1, 15), 0, None),
            ("2026-04-04T14:30:00Z", datetime(2026, 4, 5, 1, 30), 0, "fold-first"),
            ("2026-04-04T14:45:00Z", datetime(2026, 4, 5, 1, 45), 0, "fold-first"),
            ("2026-04-04T15:00:00Z", datetime(2026, 4, 5, 1, 30), 1, "fold-second"),
            ("2026-04-04T15:15:00Z", datetime(2026, 4, 5, 1, 45), 1, "fold-second"),
            ("2026-04-04T15:30:00Z", datetime(2026, 4, 5, 2, 0), 0, None),
            ("2026-04-04T15:45:00Z", datetime(2026, 4, 5, 2, 15), 0, None),
        ],
    ),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("zone", "minutes", "after", "rows"),
    BOTH_ACROSS_THE_REPEATED_HOUR,
    ids=[row[0] for row in BOTH_ACROSS_THE_REPEATED_HOUR],
)
def test_fold_both_sub_hourly_is_strictly_increasing(
    kind: str, zone: str, minutes: str, after: str, rows: list[Row]
) -> None:
    trigger = sub_hourly(kind, zone, minutes, dst_fold="both")
    found = list(trigger.instances_between(utc(after), utc(rows[-1][0])))
    assert len(found) == len(rows)
    for instance, (at, wall, fold, dst) in zip(found, rows, strict=True):
        check(instance, zone, at, wall, fold=fold, dst=dst)
    instants = [i.at for i in found]
    assert all(a < b for a, b in itertools.pairwise(instants))
    # next_after from every point, including between the two passes, gives the same sequence
    t = utc(after)
    for expected in instants:
        assert trigger.next_after(t) == expected
        assert trigger.next_after(expected - timedelta(seconds=1)) == expected
        t = expected


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("zone", "minutes", "after", "rows"),
    BOTH_ACROSS_THE_REPEATED_HOUR,
    ids=[row[0] for row in BOTH_ACROSS_THE_REPEATED_HOUR],
)
def test_fold_first_sub_hourly_drops_the_second_pass(
    kind: str, zone: str, minutes: str, after: str, rows: list[Row]
) -> None:
    trigger = sub_hourly(kind, zone, minutes, dst_fold="first")
    expected = [utc(at) for at, _, fold, _ in rows if fold == 0]
    assert list(trigger.between(utc(after), utc(rows[-1][0]))) == expected


def test_count_rule_fold_second_carries_the_ordinal_of_its_occurrence() -> None:
    """Both firings of one repeated wall time belong to the same (third) occurrence."""
    trigger = rrule(
        "FREQ=DAILY;COUNT=5;BYHOUR=2;BYMINUTE=30",
        start=datetime(2026, 10, 23),
        tz="Europe/Berlin",
        dst_fold="both",
    )
    found = list(trigger.instances_after(utc("2026-10-01T00:00:00Z")))
    assert [(i.at, i.fold, i.ordinal) for i in found] == [
        (utc("2026-10-23T00:30:00Z"), 0, 1),
        (utc("2026-10-24T00:30:00Z"), 0, 2),
        (utc("2026-10-25T00:30:00Z"), 0, 3),
        (utc("2026-10-25T01:30:00Z"), 1, 3),
        (utc("2026-10-26T01:30:00Z"), 0, 4),
        (utc("2026-10-27T01:30:00Z"), 0, 5),
    ]


@pytest.mark.parametrize("policy", ["first", "both"])
def test_rrule_never_fires_before_an_aware_start_in_the_fold(policy: str) -> None:
    """An aware start at the second 02:30 of the Berlin fold (01:30Z) is the series' start.

    The first pass of 02:30 (00:30Z) is an hour earlier than that start and must not fire.
    """
    start = datetime(2026, 10, 25, 2, 30, tzinfo=ZoneInfo("Europe/Berlin"), fold=1)
    assert start.astimezone(UTC) == utc("2026-10-25T01:30:00Z")
    for given in (start, start.astimezone(UTC)):
        trigger = rrule("FREQ=HOURLY", start=given, tz="Europe/Berlin", dst_fold=policy)  # type: ignore[arg-type]
        first = trigger.next_after(utc("2026-10-24T00:00:00Z"))
        assert first is not None
        assert first >= utc("2026-10-25T01:30:00Z")


# --- RRULE specifics around DST ------------------------------------------------------------------


def test_rrule_count_under_skip_counts_the_skipped_time() -> None:
    """Documented: under dst_gap="skip" a skipped time still counts towards COUNT."""
    trigger = rrule(
        "FREQ=DAILY;COUNT=3;BYHOUR=2;BYMINUTE=30",
        start=datetime(2026, 3, 28),
        tz="Europe/Berlin",
        dst_gap="skip",
    )
    found = list(trigger.instances_after(utc("2026-03-01T00:00:00Z")))
    assert [(i.at, i.ordinal) for i in found] == [
        (utc("2026-03-28T01:30:00Z"), 1),
        (utc("2026-03-30T00:30:00Z"), 3),
    ]


def test_rrule_count_under_shift_numbers_the_shifted_time() -> None:
    trigger = rrule(
        "FREQ=DAILY;COUNT=3;BYHOUR=2;BYMINUTE=30",
        start=datetime(2026, 3, 28),
        tz="Europe/Berlin",
    )
    found = list(trigger.instances_after(utc("2026-03-01T00:00:00Z")))
    assert [(i.at, i.ordinal, i.dst) for i in found] == [
        (utc("2026-03-28T01:30:00Z"), 1, None),
        (utc("2026-03-29T01:00:00Z"), 2, "gap-shifted"),
        (utc("2026-03-30T00:30:00Z"), 3, None),
    ]


def test_rrule_weekly_rule_keeps_its_wall_time_across_both_changes() -> None:
    trigger = rrule(
        "FREQ=WEEKLY;BYDAY=SU;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
        start=datetime(2026, 3, 1),
        tz="America/New_York",
    )
    assert list(trigger.between(utc("2026-03-01T00:00:00Z"), utc("2026-03-15T23:00:00Z"))) == [
        utc("2026-03-01T14:00:00Z"),  # EST
        utc("2026-03-08T13:00:00Z"),  # EDT from that morning
        utc("2026-03-15T13:00:00Z"),
    ]
    assert list(trigger.between(utc("2026-10-25T00:00:00Z"), utc("2026-11-08T23:00:00Z"))) == [
        utc("2026-10-25T13:00:00Z"),
        utc("2026-11-01T14:00:00Z"),  # EST again
        utc("2026-11-08T14:00:00Z"),
    ]


def test_invalid_policies_are_refused() -> None:
    from oncely import InvalidSchedule

    with pytest.raises(InvalidSchedule, match="dst_gap"):
        cron("0 2 * * *", "Europe/Berlin", dst_gap="later")  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule, match="dst_fold"):
        cron("0 2 * * *", "Europe/Berlin", dst_fold="second")  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule, match="dst_gap"):
        rrule("FREQ=DAILY", start=datetime(2026, 1, 1), dst_gap="later")  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule, match="dst_fold"):
        rrule("FREQ=DAILY", start=datetime(2026, 1, 1), dst_fold="second")  # type: ignore[arg-type]
