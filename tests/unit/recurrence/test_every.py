"""`every(...)`: absolute periods anchored at 1970-01-01T00:00Z, so independent triggers agree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oncely import InvalidSchedule, every
from oncely.recurrence import EPOCH

EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)

PERIODS = [
    ({"minutes": 7}, 420),
    ({"hours": 5}, 18_000),
    ({"days": 1}, 86_400),
    ({"seconds": 90}, 90),
    ({"seconds": 1}, 1),
    ({"days": 7, "hours": 1, "minutes": 1, "seconds": 1}, 608_461),
]


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def test_the_anchor_is_the_unix_epoch() -> None:
    assert EPOCH == EPOCH_UTC


@pytest.mark.parametrize(
    ("kwargs", "after", "expected"),
    [
        # 2026-01-01T00:00Z is 1,767,225,600 s after the epoch: a multiple of 420 and of 90
        ({"minutes": 7}, "2026-01-01T00:00:00Z", "2026-01-01T00:07:00Z"),
        ({"minutes": 7}, "2025-12-31T23:59:59.999999Z", "2026-01-01T00:00:00Z"),
        ({"seconds": 90}, "2026-01-01T00:00:00Z", "2026-01-01T00:01:30Z"),
        # ... but not of 5 hours: 98,179.2 periods, so the next is 98,180 * 18,000 s
        ({"hours": 5}, "2026-01-01T00:00:00Z", "2026-01-01T04:00:00Z"),
        ({"hours": 5}, "2026-01-01T04:00:00Z", "2026-01-01T09:00:00Z"),
        ({"days": 1}, "2026-03-29T01:30:00+01:00", "2026-03-30T00:00:00Z"),
        ({"days": 1}, "2026-03-28T23:30:00Z", "2026-03-29T00:00:00Z"),
        ({"minutes": 7}, "1970-01-01T00:00:00Z", "1970-01-01T00:07:00Z"),
        ({"minutes": 7}, "1969-12-31T23:59:00Z", "1970-01-01T00:00:00Z"),
        ({"minutes": 7}, "1969-12-31T23:52:59Z", "1969-12-31T23:53:00Z"),
    ],
)
def test_exact_next(kwargs: dict[str, float], after: str, expected: str) -> None:
    assert every(**kwargs).next_after(utc(after)) == utc(expected)


@pytest.mark.parametrize(("kwargs", "seconds"), PERIODS)
def test_two_independent_triggers_agree(kwargs: dict[str, float], seconds: int) -> None:
    a, b = every(**kwargs), every(**kwargs)
    assert a is not b
    assert a == b
    assert hash(a) == hash(b)
    period = timedelta(seconds=seconds)
    for t in (
        utc("2026-03-29T00:59:59Z"),
        utc("2026-10-25T01:00:00.5Z"),
        utc("2001-09-09T01:46:40Z"),
        datetime(2026, 7, 1, 12, 0, tzinfo=ZoneInfo("Australia/Lord_Howe")),
    ):
        x, y = a.next_after(t), b.next_after(t)
        assert x == y
        assert x is not None
        assert x.tzinfo is UTC
        assert x - period <= t < x
        assert (x - EPOCH_UTC) % period == timedelta(0)
        window = (t, t + 5 * period)
        assert list(a.between(*window)) == list(b.between(*window))
        assert list(a.between(*window)) == [x + k * period for k in range(5)]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"minutes": 7}, {"seconds": 420}),
        ({"hours": 1}, {"minutes": 60}),
        ({"days": 1}, {"hours": 24}),
        ({"minutes": 1.5}, {"seconds": 90}),
    ],
)
def test_the_same_period_spelled_differently_is_the_same_trigger(
    a: dict[str, float], b: dict[str, float]
) -> None:
    assert every(**a) == every(**b)
    t = utc("2026-05-05T05:05:05Z")
    assert every(**a).next_after(t) == every(**b).next_after(t)


@given(
    seconds=st.sampled_from([1, 7, 60, 90, 420, 3600, 18_000, 86_400, 604_800])
    | st.integers(1, 40 * 86_400),
    t=st.datetimes(
        min_value=datetime(1990, 1, 1),
        max_value=datetime(2040, 12, 31),
        timezones=st.sampled_from(
            [
                UTC,
                ZoneInfo("Europe/Berlin"),
                ZoneInfo("America/New_York"),
                timezone(-timedelta(hours=3, minutes=30)),
            ]
        ),
    ),
)
def test_agreement_property(seconds: int, t: datetime) -> None:
    period = timedelta(seconds=seconds)
    a = every(seconds=seconds)
    b = every(minutes=seconds / 60) if seconds % 60 == 0 else every(seconds=float(seconds))
    x = a.next_after(t)
    assert x is not None
    assert x == b.next_after(t)
    assert (x - EPOCH_UTC) % period == timedelta(0)
    assert x - period <= t < x
    instance = a.next_instance_after(t)
    assert instance is not None
    assert instance.at == x
    assert instance.wall == x.replace(tzinfo=None)
    assert instance.tz == "UTC"
    assert instance.fold == 0
    assert instance.dst is None
    assert instance.ordinal is None


def test_instances_are_utc_and_ignore_dst() -> None:
    trigger = every(days=1)
    found = list(
        trigger.instances_between(utc("2026-03-27T12:00:00Z"), utc("2026-03-31T00:00:00Z"))
    )
    assert [i.at for i in found] == [
        utc("2026-03-28T00:00:00Z"),
        utc("2026-03-29T00:00:00Z"),
        utc("2026-03-30T00:00:00Z"),
        utc("2026-03-31T00:00:00Z"),
    ]
    assert all(i.tz == "UTC" and i.dst is None and i.fold == 0 for i in found)


def test_between_is_half_open() -> None:
    trigger = every(minutes=7)
    a = utc("2026-01-01T00:00:00Z")
    assert list(trigger.between(a, a + timedelta(minutes=21))) == [
        a + timedelta(minutes=7),
        a + timedelta(minutes=14),
        a + timedelta(minutes=21),
    ]
    assert list(trigger.between(a, a)) == []
    assert list(trigger.between(a, a + timedelta(minutes=6, seconds=59))) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"seconds": 0},
        {"minutes": 0, "hours": 0},
        {"seconds": -1},
        {"minutes": -7},
        {"days": -1, "hours": 1},
        {"seconds": 0.5},
        {"seconds": 1.5},
        {"minutes": 0.001},
        {"seconds": float("nan")},
        {"seconds": float("inf")},
        {"days": 10**12},
    ],
)
def test_invalid_periods(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        every(**kwargs)
    assert "every" in str(caught.value)
    assert "e.g." in str(caught.value)


def test_non_numbers_are_invalid() -> None:
    with pytest.raises(InvalidSchedule):
        every(seconds="5")  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule):
        every(minutes=None)  # type: ignore[arg-type]


def test_near_the_end_of_time_the_series_ends() -> None:
    trigger = every(hours=5)
    assert trigger.next_after(datetime(9999, 12, 31, 23, tzinfo=UTC)) is None
