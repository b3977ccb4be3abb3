"""Expanding a `Rule` into wall times with dateutil, at a cost that does not grow with its age.

dateutil computes a rule by walking forward from DTSTART, so the next occurrence of a daily rule
that started ten years ago costs 3,650 steps. Here every default that dateutil would take from
DTSTART (the weekday, the day of the month, the time of day) is made explicit first; the rule then
means the same from the start of any period whose distance from DTSTART's period is a multiple of
INTERVAL, and expansion starts at the latest such period before the time asked about.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from dateutil import rrule as du

if TYPE_CHECKING:
    from oncely.recurrence.rfc5545 import Rule

Frequency = Literal[0, 1, 2, 3, 4, 5, 6]
YEARLY: Frequency = 0
MONTHLY: Frequency = 1
WEEKLY: Frequency = 2
DAILY: Frequency = 3
HOURLY: Frequency = 4
MINUTELY: Frequency = 5
SECONDLY: Frequency = 6
_FREQ: dict[str, Frequency] = {
    "YEARLY": 0,
    "MONTHLY": 1,
    "WEEKLY": 2,
    "DAILY": 3,
    "HOURLY": 4,
    "MINUTELY": 5,
    "SECONDLY": 6,
}
_WEEKDAYS = (du.MO, du.TU, du.WE, du.TH, du.FR, du.SA, du.SU)
_PROBE_BASE_YEAR = 9200  # 800 years before datetime.MAXYEAR: two whole Gregorian cycles


class EmptyRule(ValueError):
    """dateutil refused the rule as one that can never produce a time."""


@dataclass(frozen=True, slots=True)
class Expansion:
    """A rule with its DTSTART defaults made explicit, ready to expand from any aligned period."""

    freq: Frequency
    interval: int
    wkst: int
    dtstart: datetime
    parts: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, rule: Rule, dtstart: datetime) -> Expansion:
        """Fix every default dateutil would take from ``dtstart`` (naive wall time)."""
        freq = _FREQ[rule.freq]
        bymonth, bymonthday, byday = rule.bymonth, rule.bymonthday, rule.byday
        byhour, byminute, bysecond = rule.byhour, rule.byminute, rule.bysecond
        if not (rule.byweekno or rule.byyearday or bymonthday or byday):
            if freq == YEARLY:
                bymonth = bymonth or (dtstart.month,)
                bymonthday = (dtstart.day,)
            elif freq == MONTHLY:
                bymonthday = (dtstart.day,)
            elif freq == WEEKLY:
                byday = ((None, dtstart.weekday()),)
        if freq < HOURLY:
            byhour = byhour or (dtstart.hour,)
        if freq < MINUTELY:
            byminute = byminute or (dtstart.minute,)
        if freq < SECONDLY:
            bysecond = bysecond or (dtstart.second,)
        parts: dict[str, Any] = {
            "bymonth": bymonth,
            "bymonthday": bymonthday,
            "byyearday": rule.byyearday,
            "byweekno": rule.byweekno,
            "byweekday": tuple(
                _WEEKDAYS[day] if ordinal is None else _WEEKDAYS[day](ordinal)
                for ordinal, day in byday
            ),
            "byhour": byhour,
            "byminute": byminute,
            "bysecond": bysecond,
            "bysetpos": rule.bysetpos,
        }
        return cls(
            freq=freq,
            interval=rule.interval,
            wkst=rule.wkst,
            dtstart=dtstart,
            parts=tuple((name, value) for name, value in parts.items() if value),
        )

    def build(self, dtstart: datetime) -> du.rrule:
        """Return the dateutil rule starting at ``dtstart``; raise `EmptyRule` if it refuses."""
        try:
            return du.rrule(
                self.freq,
                dtstart=dtstart,
                interval=self.interval,
                wkst=self.wkst,
                cache=False,
                **dict(self.parts),
            )
        except ValueError as exc:  # e.g. an INTERVAL that never meets the BYHOUR values
            raise EmptyRule(str(exc)) from exc

    def period(self, wall: datetime) -> int:
        """Return the index of the FREQ period that contains ``wall``."""
        day = wall.toordinal()
        if self.freq == YEARLY:
            return wall.year
        if self.freq == MONTHLY:
            return wall.year * 12 + wall.month - 1
        if self.freq == WEEKLY:
            return (day - 1 - self.wkst) // 7
        if self.freq == DAILY:
            return day
        hours = day * 24 + wall.hour
        if self.freq == HOURLY:
            return hours
        minutes = hours * 60 + wall.minute
        if self.freq == MINUTELY:
            return minutes
        return minutes * 60 + wall.second

    def period_start(self, index: int) -> datetime:
        """Return the first wall time of period ``index``; past the year 9999 raise ValueError."""
        if self.freq == YEARLY:
            return datetime(index, 1, 1)
        if self.freq == MONTHLY:
            return datetime(index // 12, index % 12 + 1, 1)
        if self.freq == WEEKLY:
            return datetime.combine(
                date.fromordinal(index * 7 + 1 + self.wkst), datetime.min.time()
            )
        if self.freq == DAILY:
            return datetime.combine(date.fromordinal(index), datetime.min.time())
        per_day = {HOURLY: 24, MINUTELY: 1440, SECONDLY: 86400}[self.freq]
        day, rest = divmod(index, per_day)
        size = {HOURLY: 3600, MINUTELY: 60, SECONDLY: 1}[self.freq]
        return datetime.combine(date.fromordinal(day), datetime.min.time()) + timedelta(
            seconds=rest * size
        )

    def anchor_for(self, wall: datetime) -> int | None:
        """Return the aligned period to expand from for times after ``wall`` (None: DTSTART's)."""
        base = self.period(self.dtstart)
        steps = (self.period(wall) - base) // self.interval
        return None if steps <= 0 else base + steps * self.interval

    def could_fire(self) -> bool:
        """True when the rule produces at least one time, eventually.

        dateutil walks to the year 9999 before giving up on a rule that can never match, which
        takes seconds; this asks over two 400-year Gregorian cycles (in which every calendar shape
        occurs), at the rule's own frequency for MONTHLY and YEARLY and as a calendar-date check
        plus a BYSETPOS size check for the finer frequencies.
        """
        try:
            if self.freq in (YEARLY, MONTHLY):
                year = _PROBE_BASE_YEAR + (self.dtstart.year - _PROBE_BASE_YEAR) % 400
                moved = self.dtstart.replace(year=year)
                return self.build(moved).after(moved, inc=True) is not None
            parts = dict(self.parts)
            dates = du.rrule(
                YEARLY,
                dtstart=datetime(_PROBE_BASE_YEAR, 1, 1),
                cache=False,
                bymonth=parts.get("bymonth"),
                bymonthday=parts.get("bymonthday"),
                byyearday=parts.get("byyearday"),
                byweekday=parts.get("byweekday"),
                byhour=0,
                byminute=0,
                bysecond=0,
            )
            if dates.after(datetime(_PROBE_BASE_YEAR, 1, 1), inc=True) is None:
                return False
            self.build(self.dtstart)  # dateutil's own check of INTERVAL against BYHOUR etc.
        # dateutil raises IndexError on some BYDAY positions it cannot place in a period.
        except (EmptyRule, IndexError):
            return False
        setpos = parts.get("bysetpos")
        return not setpos or min(abs(p) for p in setpos) <= self._largest_set(parts)

    def _largest_set(self, parts: dict[str, Any]) -> int:
        size = len(parts.get("bysecond", ())) or 1
        if self.freq <= HOURLY:
            size *= len(parts.get("byminute", ())) or 1
        if self.freq <= DAILY:
            size *= len(parts.get("byhour", ())) or 1
        if self.freq == WEEKLY:
            size *= len(parts.get("byweekday", ())) or 1
        return size

    def walls_after(self, rule: du.rrule, wall: datetime) -> Iterator[datetime]:
        """Yield the wall times of ``rule`` strictly after ``wall``; stop quietly past year 9999."""
        try:
            yield from rule.xafter(wall, inc=False)
        except (OverflowError, ValueError):
            return
