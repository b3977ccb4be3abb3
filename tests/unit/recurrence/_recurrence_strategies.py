"""Hypothesis strategies shared by the recurrence property tests.

Kept cheap on purpose: start years 1990-2040, small BY sets, small intervals, so that each example
expands to a few dozen instances at most.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import strategies as st

FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")

# Zones with daylight saving (including a 30-minute one and one that changes at midnight) and
# zones without it.
DST_ZONES = (
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Europe/Dublin",
)
FIXED_ZONES = ("UTC", "Asia/Tokyo", "Etc/GMT-5", "Etc/GMT+3", "Asia/Kolkata")
ALL_ZONES = DST_ZONES + FIXED_ZONES

START = datetime(1990, 1, 1)
STOP = datetime(2040, 12, 31, 23, 59, 59)


def _transitions(zone: str, years: range) -> list[datetime]:
    """UTC instants at which ``zone`` changes its offset in ``years`` (scan daily, then bisect)."""
    tz = ZoneInfo(zone)
    found: list[datetime] = []
    t = datetime(years.start, 1, 1, tzinfo=UTC)
    end = datetime(years.stop, 1, 1, tzinfo=UTC)
    step = timedelta(hours=12)
    while t < end:
        nxt = t + step
        if t.astimezone(tz).utcoffset() != nxt.astimezone(tz).utcoffset():
            low, high = t, nxt
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                middle = middle.replace(microsecond=0)
                if middle.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset():
                    low = middle
                else:
                    high = middle
            found.append(high)
        t = nxt
    return found


TRANSITIONS = {zone: _transitions(zone, range(2024, 2029)) for zone in DST_ZONES}


def naive_walls(min_year: int = 1990, max_year: int = 2040) -> st.SearchStrategy[datetime]:
    """Naive wall times in whole seconds, spread evenly over the years (cheaper than datetimes)."""
    return st.builds(
        lambda year, second: datetime(year, 1, 1) + timedelta(seconds=second),
        st.sampled_from(range(min_year, max_year + 1)),
        st.integers(0, 365 * 86400 - 1),
    )


@st.composite
def instants_near(draw: st.DrawFn, zone: str) -> datetime:
    """An aware UTC instant: anywhere in 1990-2040, or within two days of a DST change."""
    if zone in TRANSITIONS and draw(st.booleans()):
        base = draw(st.sampled_from(TRANSITIONS[zone]))
        offset = draw(st.integers(-2 * 86400, 2 * 86400))
        micro = draw(st.sampled_from((0, 0, 1, 999_999)))
        return base + timedelta(seconds=offset, microseconds=micro)
    wall = draw(naive_walls(START.year, STOP.year))
    micro = draw(st.sampled_from((0, 0, 0, 1, 999_999)))
    return (wall + timedelta(microseconds=micro)).replace(tzinfo=UTC)


def _signed(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high) | st.integers(-high, -low)


def _ints(values: st.SearchStrategy[int], most: int) -> st.SearchStrategy[list[int]]:
    return st.lists(values, min_size=1, max_size=most, unique=True)


@st.composite
def rule_bodies(
    draw: st.DrawFn, freqs: tuple[str, ...] = FREQS, max_interval: int = 5, dense: bool = True
) -> tuple[str, list[str]]:
    """(FREQ, parts) of a rule without bounds; most are valid, some are not (callers filter).

    ``dense=False`` keeps SECONDLY rules to a few seconds a minute (by BYSECOND), so that walking
    through a DST gap or fold stays cheap. SECONDLY rules never get date filters (BYMONTH,
    BYMONTHDAY, BYYEARDAY, BYDAY): dateutil walks those second by second through every matching
    hour, which can take many seconds per rule (MINUTELY and HOURLY rules cover the filters).
    """
    freq = draw(st.sampled_from(freqs))
    parts = [f"FREQ={freq}"]
    interval = draw(st.integers(1, max_interval))
    if interval > 1 or draw(st.booleans()):
        parts.append(f"INTERVAL={interval}")
    by: list[str] = []

    def maybe(name: str, values: st.SearchStrategy[list[int]]) -> None:
        if draw(st.integers(0, 3)) == 0:
            by.append(f"{name}=" + ",".join(str(v) for v in draw(values)))

    dates = freq != "SECONDLY"
    if dates:
        maybe("BYMONTH", _ints(st.integers(1, 12), 3))
    if dates and freq != "WEEKLY":
        maybe("BYMONTHDAY", _ints(_signed(1, 31), 3))
    if freq in ("YEARLY", "HOURLY", "MINUTELY"):
        maybe("BYYEARDAY", _ints(_signed(1, 366), 3))
    if freq == "YEARLY":
        maybe("BYWEEKNO", _ints(_signed(1, 53), 2))
    if dates and draw(st.integers(0, 2)) == 0:
        # Positions (1MO, -1FR) only with MONTHLY/YEARLY, and not mixed with plain weekdays:
        # dateutil intersects the two kinds (RFC 5545 unites them), so oncely refuses the mix.
        positioned = freq in ("MONTHLY", "YEARLY") and draw(st.booleans())
        days = draw(st.lists(st.sampled_from(WEEKDAYS), min_size=1, max_size=4, unique=True))
        if positioned:
            limit = 5 if freq == "MONTHLY" else 53
            items = [f"{draw(_signed(1, 5) | _signed(1, limit))}{day}" for day in days]
        else:
            items = list(days)
        by.append("BYDAY=" + ",".join(items))
    if freq != "HOURLY" or draw(st.booleans()):
        maybe("BYHOUR", _ints(st.integers(0, 23), 3))
    maybe("BYMINUTE", _ints(st.integers(0, 59), 3))
    if freq == "SECONDLY" and not dense:
        by.append("BYSECOND=" + ",".join(str(v) for v in draw(_ints(st.integers(0, 59), 2))))
    else:
        maybe("BYSECOND", _ints(st.integers(0, 59), 2))
    # BYSETPOS picks within each FREQ period; for HOURLY and finer a period is tiny and
    # dateutil's expansion of it is slow, so keep it to DAILY and coarser.
    if by and freq in FREQS[:4] and draw(st.integers(0, 3)) == 0:
        by.append("BYSETPOS=" + ",".join(str(v) for v in draw(_ints(_signed(1, 5), 2))))
    if draw(st.integers(0, 3)) == 0:
        by.append(f"WKST={draw(st.sampled_from(WEEKDAYS))}")
    parts.extend(draw(st.permutations(by)))
    return freq, parts


VALID_RULES = (
    "FREQ=DAILY",
    "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=9",
    "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
    "FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU;BYHOUR=2;BYMINUTE=30",
    "FREQ=HOURLY;INTERVAL=3;BYMINUTE=0,30",
    "FREQ=MINUTELY;INTERVAL=15;COUNT=10",
    "FREQ=DAILY;UNTIL=20261231T235959Z",
    "FREQ=DAILY;UNTIL=20261231",
    "FREQ=YEARLY;BYWEEKNO=1,27;BYDAY=MO;WKST=SU",
    "FREQ=MONTHLY;BYMONTHDAY=1,15,-1;COUNT=100",
    "DTSTART;TZID=Europe/Paris:20260105T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO",
    "DTSTART:20260105T080000Z\nRRULE:FREQ=DAILY;COUNT=3",
    "RRULE:FREQ=SECONDLY;INTERVAL=30;BYSECOND=0,30",
    "FREQ=YEARLY;BYYEARDAY=1,-1;UNTIL=20300101T000000",
)

VALID_CRONS = (
    "* * * * *",
    "0 9 * * MON-FRI",
    "*/5 * * * *",
    "30 2 * * *",
    "0,30 * * * *",
    "0 0 1 1 *",
    "0 0 L * *",
    "0 12 * * 5L",
    "0 8 * * FRI#2",
    "*/15 0 1,15 * 1-5",
    "0 */2 * JAN,JUL *",
    "@daily",
    "@hourly",
    "0 0 29 2 *",
    "15 * * * * *",
)


@st.composite
def cron_exprs(draw: st.DrawFn) -> str:
    """Cron expressions that are valid (mostly): a mix of steps, ranges, lists and names."""

    def field(low: int, high: int) -> str:
        kind = draw(st.integers(0, 5))
        if kind == 0:
            return "*"
        if kind == 1:
            return f"*/{draw(st.integers(1, max(1, (high - low) // 2)))}"
        if kind == 2:
            return str(draw(st.integers(low, high)))
        if kind == 3:
            a = draw(st.integers(low, high))
            b = draw(st.integers(a, high))
            step = draw(st.integers(1, 3))
            return f"{a}-{b}" + (f"/{step}" if step > 1 else "")
        values = draw(st.lists(st.integers(low, high), min_size=1, max_size=3, unique=True))
        return ",".join(str(v) for v in sorted(values))

    fields = [field(0, 59), field(0, 23), field(1, 28), field(1, 12), field(0, 6)]
    special = draw(st.integers(0, 9))
    if special == 0:
        fields[2] = draw(st.sampled_from(("L", "LW", "29", "30,31", "31")))
        fields[3] = "*"
    elif special == 1:
        fields[4] = draw(st.sampled_from(("MON-FRI", "5L", "FRI#2", "SUN", "SAT,SUN", "1#5")))
    elif special == 2:
        # six fields, seconds first; a few seconds a minute, so DST gaps stay cheap to walk
        seconds = draw(st.lists(st.integers(0, 59), min_size=1, max_size=3, unique=True))
        fields.insert(0, ",".join(str(v) for v in sorted(seconds)))
    elif special == 3:
        return draw(st.sampled_from(VALID_CRONS))
    return " ".join(fields)


def until_text(kind: str, wall: datetime) -> str:
    if kind == "date":
        return wall.strftime("%Y%m%d")
    return wall.strftime("%Y%m%dT%H%M%S") + ("Z" if kind == "utc" else "")
