"""Property: in zones without DST edges, oncely's expansion equals dateutil's own.

dateutil walks every rule from its DTSTART; oncely re-anchors to an aligned period near the time
asked about (and resumes COUNT rules from checkpoints). Both must give the same wall times, for
every FREQ with INTERVAL 1-5 and the BY parts, from query times near the start and far from it.

oncely's date-only UNTIL deliberately includes the whole local day; dateutil reads it as midnight,
so the reference is given UNTIL=<date>T235959 instead.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from _recurrence_strategies import FIXED_ZONES, naive_walls, rule_bodies, until_text
from dateutil import rrule as du
from hypothesis import assume, given
from hypothesis import strategies as st

from oncely import InvalidSchedule, rrule

FIRST = 12  # instances compared per example

# How far from the start a query may be, per FREQ: ten years where dateutil's own walk from
# DTSTART stays cheap (about 3,650 periods for DAILY), a few thousand periods below that.
REACH = {
    "YEARLY": timedelta(days=3653),
    "MONTHLY": timedelta(days=3653),
    "WEEKLY": timedelta(days=3653),
    "DAILY": timedelta(days=3653),
    "HOURLY": timedelta(days=200),
    "MINUTELY": timedelta(days=4),
    "SECONDLY": timedelta(hours=1),
}


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, str, datetime, datetime]:
    """(oncely text, dateutil text, zone, naive start, naive query wall time)."""
    freq, parts = draw(rule_bodies())
    zone = draw(st.sampled_from(FIXED_ZONES))
    start = draw(naive_walls(1990, 2030))
    reach = REACH[freq]
    if draw(st.integers(0, 3)) == 0:  # far: the last stretch of the reach (ten years for DAILY)
        offset = reach * draw(st.floats(0.9, 1.0))
    else:
        offset = reach * draw(st.floats(-0.05, 1.0))
    query = (start + offset).replace(microsecond=0) + timedelta(
        microseconds=draw(st.sampled_from((0, 0, 1, 500_000)))
    )
    ours = list(parts)
    reference = list(parts)
    bound = draw(st.sampled_from(("count", "until", "none")))
    if bound == "count":
        count = draw(st.integers(1, 400))
        ours.append(f"COUNT={count}")
        reference.append(f"COUNT={count}")
    elif bound == "until":
        kinds = ("date", "local", "utc") if zone == "UTC" else ("date", "local")
        kind = draw(st.sampled_from(kinds))
        until = (start + reach * draw(st.floats(0.0, 1.2))).replace(microsecond=0)
        ours.append("UNTIL=" + until_text(kind, until))
        # dateutil reads a date as its midnight; oncely includes the whole day
        whole_day = until.replace(hour=23, minute=59, second=59)
        reference.append("UNTIL=" + until_text("local", whole_day if kind == "date" else until))
    order = draw(st.permutations(range(len(ours))))
    return (
        ";".join(ours[i] for i in order),
        ";".join(reference[i] for i in order),
        zone,
        start,
        query,
    )


@given(cases())
def test_expansion_equals_dateutil_in_zones_without_dst(
    case: tuple[str, str, str, datetime, datetime],
) -> None:
    text, reference_text, zone, start, query = case
    try:
        trigger = rrule(text, start=start, tz=zone, max_span=None)
    except InvalidSchedule:
        assume(False)
        raise
    reference = du.rrulestr(reference_text, dtstart=start, cache=False)
    expected = list(itertools.islice(reference.xafter(query, inc=False), FIRST))

    instant = query.replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)
    found = list(itertools.islice(trigger.instances_after(instant), FIRST))
    assert [i.wall for i in found] == expected
    for instance in found:
        assert instance.nominal == instance.wall
        assert instance.fold == 0
        assert instance.dst is None
        assert instance.at == instance.wall.replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)
    if trigger.rule.count is not None and found:
        # ordinals are positions in the whole series
        series = list(itertools.islice(du.rrulestr(reference_text, dtstart=start), 400))
        assert [i.ordinal for i in found] == [series.index(i.wall) + 1 for i in found]
    else:
        assert all(i.ordinal is None for i in found)
    # and next_after from the same query gives the first of them
    assert trigger.next_after(instant) == (found[0].at if found else None)


def test_a_daily_rule_ten_years_old_equals_dateutil() -> None:
    text = "FREQ=DAILY;INTERVAL=3;BYHOUR=9,17;BYMINUTE=30"
    start = datetime(2016, 2, 29, 9, 30)
    reference = du.rrulestr(text, dtstart=start)
    trigger = rrule(text, start=start, tz="Asia/Tokyo", max_span=None)
    query = datetime(2026, 2, 28, 23, 0)
    expected = list(itertools.islice(reference.xafter(query), 20))
    instant = query.replace(tzinfo=ZoneInfo("Asia/Tokyo"))
    assert [i.wall for i in itertools.islice(trigger.instances_after(instant), 20)] == expected


def test_a_monthly_setpos_rule_ten_years_old_equals_dateutil() -> None:
    text = "FREQ=MONTHLY;INTERVAL=2;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18"
    start = datetime(2015, 11, 3, 18, 0)
    reference = du.rrulestr(text, dtstart=start)
    trigger = rrule(text, start=start, tz="UTC", max_span=None)
    query = datetime(2025, 12, 31, 0, 0)
    expected = list(itertools.islice(reference.xafter(query), 12))
    found = itertools.islice(trigger.instances_after(query.replace(tzinfo=UTC)), 12)
    assert [i.wall for i in found] == expected


def test_a_weekly_rule_with_wkst_ten_years_old_equals_dateutil() -> None:
    text = "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,SU;WKST=SU;BYHOUR=8;BYMINUTE=0;BYSECOND=0"
    start = datetime(2016, 1, 6, 12, 0)  # a Wednesday
    reference = du.rrulestr(text, dtstart=start)
    trigger = rrule(text, start=start, tz="Etc/GMT-5", max_span=None)
    query = datetime(2026, 1, 1, 0, 0)
    expected = list(itertools.islice(reference.xafter(query), 12))
    instant = query.replace(tzinfo=ZoneInfo("Etc/GMT-5"))
    found = itertools.islice(trigger.instances_after(instant), 12)
    assert [i.wall for i in found] == expected
