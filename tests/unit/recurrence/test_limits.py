"""The edges of time: a series near datetime.max/min ends or is refused, never overflows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from oncely import InvalidSchedule, cron, every, rrule

# After the last local midnight of 9999-12-31 in every zone used here (New York's is 05:00Z).
END_OF_TIME = datetime(9999, 12, 31, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/New_York"])
def test_cron_near_the_end_of_time_ends(zone: str) -> None:
    trigger = cron("0 0 * * *", zone)
    assert trigger.next_after(END_OF_TIME) is None
    assert list(trigger.between(END_OF_TIME, datetime.max.replace(tzinfo=UTC))) == []


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/New_York"])
def test_perpetual_rrule_near_the_end_of_time_ends(zone: str) -> None:
    trigger = rrule("FREQ=DAILY", start=datetime(9999, 1, 1), tz=zone, max_span=None)
    assert trigger.next_after(END_OF_TIME) is None


def test_every_near_the_end_of_time_ends() -> None:
    assert every(days=1).next_after(END_OF_TIME) is None


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/New_York"])
@pytest.mark.parametrize("until", ["99991231", "99991231T235959", "99991231T235959Z"])
def test_until_at_the_end_of_time_is_a_valid_bound(zone: str, until: str) -> None:
    trigger = rrule(f"FREQ=DAILY;UNTIL={until}", start=datetime(2026, 1, 1, 12, 0), tz=zone)
    first = trigger.next_instance_after(datetime(2025, 12, 1, tzinfo=UTC))
    assert first is not None
    assert first.wall == datetime(2026, 1, 1, 12, 0)
    assert trigger.next_after(datetime(2030, 6, 1, 12, 0, tzinfo=UTC)) is not None


@pytest.mark.parametrize(
    ("build", "zone"),
    [
        (lambda: rrule("FREQ=DAILY", start=datetime(1, 1, 1), tz="Asia/Tokyo"), "Asia/Tokyo"),
        (lambda: rrule("DTSTART;TZID=Asia/Tokyo:00010101T000000\nRRULE:FREQ=DAILY"), "Asia/Tokyo"),
        (
            lambda: rrule("FREQ=DAILY", start=datetime(9999, 12, 31, 23), tz="America/New_York"),
            "America/New_York",
        ),
        (
            lambda: rrule("DTSTART:99991231T230000Z\nRRULE:FREQ=HOURLY", tz="America/New_York"),
            "America/New_York",
        ),
    ],
    ids=["start-year-1-tokyo", "dtstart-year-1-tokyo", "start-9999-ny", "dtstart-9999-z-ny"],
)
def test_starts_at_the_edges_of_time_are_refused_with_the_range_to_use(
    build: Callable[[], object], zone: str
) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        build()
    message = str(caught.value)
    assert "too close to the ends of the calendar" in message, message
    assert zone in message, message
    assert "start between the years 2 and 9998" in message, message


@pytest.mark.parametrize(
    ("start", "zone", "first"),
    [
        # Tokyo's local mean time before 1888 was UTC+09:18:59.
        (datetime(2, 1, 1), "Asia/Tokyo", datetime(1, 12, 31, 14, 41, 1, tzinfo=UTC)),
        (datetime(9998, 12, 1), "America/New_York", datetime(9998, 12, 1, 5, 0, tzinfo=UTC)),
    ],
)
def test_starts_just_inside_the_edges_of_time_build_and_answer(
    start: datetime, zone: str, first: datetime
) -> None:
    trigger = rrule("FREQ=DAILY;COUNT=3", start=start, tz=zone)
    whole_calendar = (datetime(1, 1, 2, tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
    assert list(trigger.between(*whole_calendar)) == [first + timedelta(days=n) for n in range(3)]
    assert trigger.next_after(first + timedelta(days=2)) is None


@pytest.mark.xfail(
    strict=True,
    reason="asked from datetime.min, a zone west of UTC overflows and the series reads as ended",
)
def test_the_first_instance_after_the_start_of_time_is_the_first_instance() -> None:
    trigger = rrule("FREQ=DAILY;COUNT=3", start=datetime(2026, 12, 1), tz="America/New_York")
    assert trigger.next_after(datetime.min.replace(tzinfo=UTC)) == datetime(
        2026, 12, 1, 5, 0, tzinfo=UTC
    )
