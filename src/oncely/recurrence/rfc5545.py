"""RRULE text (RFC 5545, section 3.3.10) read into a checked `Rule`, in two postures.

``validate_rrule`` is for a person filling in a form: it raises `InvalidSchedule` saying which part
is wrong and what a right one looks like. ``parse_rrule`` is for the scheduler reading stored rules:
it returns None and logs one WARNING instead, so one bad rule stops only its own schedule.

The lenient posture repairs only what has one safe reading. A part repeated with the same value is
kept once. Several UNTIL parts keep the earliest; several COUNT parts the smallest; UNTIL with COUNT
stops at whichever ends first. It never adds a part: a rule's own bounds are authoritative.
"""

from __future__ import annotations

import calendar
import dataclasses
import difflib
import logging
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from oncely.errors import InvalidSchedule
from oncely.recurrence.expansion import Expansion
from oncely.recurrence.lenient import input_key, warn_once

logger = logging.getLogger("oncely.recurrence")

FREQUENCIES = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
MAX_COUNT = 100_000
MAX_INTERVAL = 1_000_000
MAX_TEXT = 2_000

_INT_PARTS = {  # name: (low, high, may be negative, example)
    "BYSECOND": (0, 59, False, "BYSECOND=0,30"),
    "BYMINUTE": (0, 59, False, "BYMINUTE=0,15,30,45"),
    "BYHOUR": (0, 23, False, "BYHOUR=9,17"),
    "BYMONTHDAY": (1, 31, True, "BYMONTHDAY=1,15 or BYMONTHDAY=-1 for the last day"),
    "BYYEARDAY": (1, 366, True, "BYYEARDAY=1,-1"),
    "BYWEEKNO": (1, 53, True, "BYWEEKNO=1,27"),
    "BYMONTH": (1, 12, False, "BYMONTH=1,7"),
    "BYSETPOS": (1, 366, True, "BYSETPOS=-1 for the last one of each period"),
}
_PART_NAMES = ("FREQ", "INTERVAL", "COUNT", "UNTIL", "BYDAY", "WKST", *_INT_PARTS)
_UNTIL_FORMAT = re.compile(r"^(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})(Z?))?$")
_BYDAY_FORMAT = re.compile(r"^([+-]?)(\d{1,2})?([A-Z]{2})$")
_DTSTART_FORMAT = re.compile(r"^DTSTART(?:;TZID=([^:;]+))?(?:;VALUE=DATE(?:-TIME)?)?:(\S+)$")
_EXAMPLE = "e.g. FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9"
_NEUTRAL_START = datetime(2000, 1, 1)


@dataclass(frozen=True, slots=True)
class Until:
    """An UNTIL bound: a wall time (naive), flagged when it was given in UTC or as a date."""

    value: datetime
    utc: bool = False
    date_only: bool = False


@dataclass(frozen=True, slots=True)
class Start:
    """A DTSTART line: a naive time, with the zone it was given in (``utc`` for a Z suffix)."""

    value: datetime
    tzid: str | None = None
    utc: bool = False


@dataclass(frozen=True, slots=True)
class Rule:
    """A checked recurrence rule.

    ``text`` is the normal form (upper case, parts in their given order, no ``RRULE:`` prefix);
    ``untils`` holds one UNTIL in a strict rule and possibly several in a lenient one (the
    earliest applies). ``byday`` pairs an optional ordinal with a weekday (0 = Monday).
    """

    text: str
    freq: str
    interval: int = 1
    count: int | None = None
    untils: tuple[Until, ...] = ()
    bysecond: tuple[int, ...] = ()
    byminute: tuple[int, ...] = ()
    byhour: tuple[int, ...] = ()
    byday: tuple[tuple[int | None, int], ...] = ()
    bymonthday: tuple[int, ...] = ()
    byyearday: tuple[int, ...] = ()
    byweekno: tuple[int, ...] = ()
    bymonth: tuple[int, ...] = ()
    bysetpos: tuple[int, ...] = ()
    wkst: int = 0
    start: Start | None = field(default=None, compare=True)

    @property
    def bounded(self) -> bool:
        """True when the rule ends by itself (UNTIL or COUNT)."""
        return bool(self.untils) or self.count is not None


def validate_rrule(text: str) -> Rule:
    """Return the `Rule` that ``text`` spells, or raise `InvalidSchedule` saying what to fix.

    Accepts a bare rule (``FREQ=DAILY;BYHOUR=9``), an ``RRULE:`` line, and optionally a preceding
    ``DTSTART`` line (``DTSTART;TZID=Europe/Paris:20260105T090000``). Names and values are
    case-insensitive. A part given twice is an error, as RFC 5545 says, and so are UNTIL with
    COUNT, values out of range, parts the frequency does not allow, and combinations no calendar
    date can ever satisfy (such as BYMONTH=2;BYMONTHDAY=30).
    """
    return _read(text, strict=True)


def parse_rrule(text: str) -> Rule | None:
    """Return the `Rule` that ``text`` spells, repaired where one reading is safe, or None.

    Never raises. An unusable rule logs one WARNING per distinct text (not one per call): the
    scheduler's posture, where a bad stored rule stops only its own schedule.
    """
    try:
        return _read(text, strict=False)
    except InvalidSchedule as exc:
        warn_once(logger, input_key("rrule", text), "ignoring invalid recurrence rule: %s", exc)
    except Exception as exc:  # the lenient posture never raises, whatever the input
        warn_once(
            logger,
            input_key("rrule", text),
            "ignoring unreadable recurrence rule: %s",
            type(exc).__name__,
        )
    return None


def read_stored_rrule(text: str) -> Rule:
    """Return the `Rule` of a stored text, as `parse_rrule` reads it, or raise `InvalidSchedule`.

    For rebuilding a rule either posture once accepted (a lenient one may keep UNTIL with COUNT)
    where the caller reports the reason itself instead of a logged WARNING.
    """
    return _read(text, strict=False)


def _read(text: str, *, strict: bool) -> Rule:
    if not isinstance(text, str):
        raise InvalidSchedule(f"a rule is text, not {type(text).__name__}", hint=_EXAMPLE)
    # the text goes into messages through repr(), which a str subclass could override
    text = str.__str__(text)
    if len(text) > MAX_TEXT:
        raise InvalidSchedule(
            f"the rule is {len(text)} characters long; at most {MAX_TEXT} are accepted",
            rule=text[:60] + "...",
            hint=_EXAMPLE,
        )
    start: Start | None = None
    rule_lines: list[str] = []
    for raw in text.replace("\r", "\n").split("\n"):
        line = raw.strip()
        if not line:
            continue
        upper = line.upper()
        if upper.startswith("DTSTART"):
            if start is not None:
                raise InvalidSchedule("DTSTART appears twice", rule=text, hint="give one start")
            start = _read_dtstart(line, text)
        elif upper.startswith("RRULE:"):
            rule_lines.append(line[len("RRULE:") :])
        elif upper.startswith(("EXDATE", "RDATE", "EXRULE")):
            raise InvalidSchedule(
                f"{upper.split(':')[0].split(';')[0]} is not supported",
                rule=text,
                hint="give one rule, with an optional DTSTART line",
            )
        else:
            rule_lines.append(line)
    if not rule_lines:
        raise InvalidSchedule("the rule is empty", rule=text, hint=_EXAMPLE)
    if len(rule_lines) > 1:
        raise InvalidSchedule(
            f"{len(rule_lines)} rules given; oncely takes one rule per schedule",
            rule=text,
            hint=_EXAMPLE,
        )
    return _read_parts(rule_lines[0], text, start, strict=strict)


def _read_dtstart(line: str, text: str) -> Start:
    match = _DTSTART_FORMAT.match(line.strip())
    if match is None:
        raise InvalidSchedule(
            f"cannot read the start line {line!r}",
            rule=text,
            hint="e.g. DTSTART;TZID=Europe/Paris:20260105T090000 or DTSTART:20260105T080000Z",
        )
    tzid, value = match.group(1), match.group(2).upper()
    moment = _read_until(value, text, name="DTSTART")
    if moment.utc and tzid:
        raise InvalidSchedule(
            "DTSTART has both a TZID and a Z (UTC) suffix", rule=text, hint="give one of them"
        )
    return Start(moment.value, tzid=tzid, utc=moment.utc)


def _read_parts(line: str, text: str, start: Start | None, *, strict: bool) -> Rule:
    values: dict[str, list[str]] = {}
    order: list[str] = []
    for raw in line.split(";"):
        piece = raw.strip()
        if not piece:
            continue
        name, sep, value = piece.partition("=")
        name, value = name.strip().upper(), value.strip().upper()
        if not sep or not name:
            raise InvalidSchedule(f"{piece!r} is not NAME=VALUE", rule=text, hint=_EXAMPLE)
        if name not in _PART_NAMES:
            close = difflib.get_close_matches(name, _PART_NAMES, n=1)
            hint = f"did you mean {close[0]}?" if close else "parts are " + ", ".join(_PART_NAMES)
            raise InvalidSchedule(f"unknown rule part {name!r}", rule=text, hint=hint)
        if not value:
            raise InvalidSchedule(f"{name} has no value", rule=text, hint=_example_of(name))
        if name not in values:
            values[name] = []
            order.append(name)
        values[name].append(value)

    for name, given in values.items():
        if len(given) > 1 and (strict or (name not in ("UNTIL", "COUNT") and len(set(given)) > 1)):
            raise InvalidSchedule(
                f"{name} appears {len(given)} times; a rule part may appear only once "
                "(RFC 5545 section 3.3.10)",
                rule=text,
                hint="keep the earliest UNTIL" if name == "UNTIL" else f"keep one {name}",
            )

    if "FREQ" not in values:
        raise InvalidSchedule("FREQ is missing", rule=text, hint="start with FREQ=DAILY, ...")
    freq = values["FREQ"][0]
    if freq not in FREQUENCIES:
        raise InvalidSchedule(
            f"FREQ={freq} is not a frequency",
            rule=text,
            hint="use one of " + ", ".join(FREQUENCIES),
        )
    if strict and "COUNT" in values and "UNTIL" in values:
        raise InvalidSchedule(
            "UNTIL and COUNT are both given; a rule ends one way (RFC 5545)",
            rule=text,
            hint="keep UNTIL=20261231T235959Z or COUNT=10, not both",
        )
    counts = [_positive(c, "COUNT", MAX_COUNT, text) for c in values.get("COUNT", [])]
    intervals = [_positive(i, "INTERVAL", MAX_INTERVAL, text) for i in values.get("INTERVAL", [])]
    untils = _effective_untils([_read_until(u, text) for u in values.get("UNTIL", [])])
    ints = {name: _int_list(values[name][0], name, text) for name in _INT_PARTS if name in values}
    # With FREQ=YEARLY and BYMONTH (and no BYWEEKNO) a BYDAY position counts within the month.
    in_month = freq == "MONTHLY" or (
        freq == "YEARLY" and "BYMONTH" in values and "BYWEEKNO" not in values
    )
    byday = _byday(values["BYDAY"][0], freq, in_month, text) if "BYDAY" in values else ()
    wkst = WEEKDAYS.index(_weekday(values["WKST"][0], "WKST", text)) if "WKST" in values else 0

    rule = Rule(
        text=_normal_text(order, values, counts, untils),
        freq=freq,
        interval=intervals[0] if intervals else 1,
        count=min(counts) if counts else None,
        untils=untils,
        bysecond=ints.get("BYSECOND", ()),
        byminute=ints.get("BYMINUTE", ()),
        byhour=ints.get("BYHOUR", ()),
        byday=byday,
        bymonthday=ints.get("BYMONTHDAY", ()),
        byyearday=ints.get("BYYEARDAY", ()),
        byweekno=ints.get("BYWEEKNO", ()),
        bymonth=ints.get("BYMONTH", ()),
        bysetpos=ints.get("BYSETPOS", ()),
        wkst=wkst,
        start=start,
    )
    _check_combinations(rule, text)
    # dateutil walks to the year 9999 before giving up on a rule no date can match; catch those
    # here so neither posture ever does that walk. Without a DTSTART the INTERVAL's phase is
    # unknown, so only rules that no phase could satisfy (INTERVAL=1 finds nothing) are refused.
    if start is not None:
        expansion = Expansion.of(rule, start.value)
    else:
        expansion = dataclasses.replace(Expansion.of(rule, _NEUTRAL_START), interval=1)
    if not expansion.could_fire():
        raise InvalidSchedule(
            "no date ever matches this rule, so it never fires",
            rule=text,
            hint="check BYSETPOS and BYDAY positions against the other BY parts, "
            "e.g. FREQ=MONTHLY;BYDAY=MO;BYSETPOS=-1 for the last Monday",
        )
    return rule


def _example_of(name: str) -> str:
    examples = {
        "FREQ": "e.g. FREQ=DAILY",
        "INTERVAL": "e.g. INTERVAL=2 for every other period",
        "COUNT": "e.g. COUNT=10",
        "UNTIL": "e.g. UNTIL=20261231T235959Z",
        "BYDAY": "e.g. BYDAY=MO,WE,FR or BYDAY=-1FR (last Friday) with FREQ=MONTHLY",
        "WKST": "e.g. WKST=MO",
    }
    return examples.get(name) or f"e.g. {_INT_PARTS[name][3]}"


def _is_digits(text: str) -> bool:
    """True for ASCII digits only: str.isdigit() also accepts "²" and "①", which int() refuses."""
    return text.isascii() and text.isdigit()


def _positive(value: str, name: str, high: int, text: str) -> int:
    if not _is_digits(value) or not 1 <= int(value) <= high:
        raise InvalidSchedule(
            f"{name}={value} is not a whole number from 1 to {high}",
            rule=text,
            hint=_example_of(name),
        )
    return int(value)


def _effective_untils(untils: list[Until]) -> tuple[Until, ...]:
    """Keep the earliest of several UNTILs of one kind; UNTILs of mixed kinds are all kept."""
    kinds = {(u.utc, u.date_only) for u in untils}
    if len(kinds) == 1:
        return (min(untils, key=lambda u: u.value),)
    return tuple(dict.fromkeys(untils))


def _normal_text(
    order: list[str], values: dict[str, list[str]], counts: list[int], untils: tuple[Until, ...]
) -> str:
    parts: list[str] = []
    for name in order:
        if name == "UNTIL":
            parts.extend(f"UNTIL={_format_until(u)}" for u in untils)
        elif name == "COUNT":
            parts.append(f"COUNT={min(counts)}")
        else:
            parts.append(f"{name}={values[name][0]}")
    return ";".join(parts)


def _format_until(until: Until) -> str:
    # Not strftime("%Y"): on glibc it does not pad years before 1000, and "UNTIL=10101" (year 1)
    # would be stored as a normal form that no longer reads back.
    v = until.value
    day = f"{v.year:04d}{v.month:02d}{v.day:02d}"
    if until.date_only:
        return day
    return f"{day}T{v.hour:02d}{v.minute:02d}{v.second:02d}" + ("Z" if until.utc else "")


def _read_until(value: str, text: str, name: str = "UNTIL") -> Until:
    match = _UNTIL_FORMAT.match(value)
    hint = f"e.g. {name}=20261231T235959Z (UTC) or {name}=20261231 (a date)"
    if match is None:
        raise InvalidSchedule(f"{name}={value} is not a date or date-time", rule=text, hint=hint)
    year, month, day, hour, minute, second, zulu = match.groups()
    try:
        if hour is None:
            return Until(datetime(int(year), int(month), int(day)), date_only=True)
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    except ValueError as exc:
        raise InvalidSchedule(
            f"{name}={value} is not a real date: {exc}", rule=text, hint=hint
        ) from exc
    return Until(moment, utc=bool(zulu))


def _int_list(value: str, name: str, text: str) -> tuple[int, ...]:
    low, high, signed, example = _INT_PARTS[name]
    result: list[int] = []
    for item in value.split(","):
        item = item.strip()
        digits = item[1:] if signed and item[:1] in "+-" else item
        number = int(item) if _is_digits(digits) and len(digits) <= 4 else None
        if number is None or not low <= abs(number) <= high or (number < 0 and not signed):
            allowed = f"{low} to {high}" + (
                f", or -{high} to -{low} counting back" if signed else ""
            )
            raise InvalidSchedule(
                f"{name} value {item!r} is out of range ({allowed})",
                rule=text,
                hint=f"e.g. {example}",
            )
        if number not in result:
            result.append(number)
    return tuple(sorted(result))


def _weekday(value: str, name: str, text: str) -> str:
    if value not in WEEKDAYS:
        raise InvalidSchedule(
            f"{name} value {value!r} is not a weekday", rule=text, hint="use MO TU WE TH FR SA SU"
        )
    return value


def _byday(value: str, freq: str, in_month: bool, text: str) -> tuple[tuple[int | None, int], ...]:
    result: list[tuple[int | None, int]] = []
    for item in value.split(","):
        item = item.strip()
        match = _BYDAY_FORMAT.match(item)
        if match is None:
            raise InvalidSchedule(
                f"BYDAY value {item!r} is not a weekday", rule=text, hint=_example_of("BYDAY")
            )
        sign, digits, name = match.groups()
        weekday = WEEKDAYS.index(_weekday(name, "BYDAY", text))
        ordinal: int | None = None
        if digits is not None:
            limit = 5 if in_month else {"YEARLY": 53}.get(freq)
            if limit is None:
                raise InvalidSchedule(
                    f"BYDAY value {item!r} has a position, which only FREQ=MONTHLY or YEARLY "
                    "allows",
                    rule=text,
                    hint=f"use BYDAY={name} or FREQ=MONTHLY;BYDAY={item}",
                )
            ordinal = int(digits) * (-1 if sign == "-" else 1)
            if not 1 <= abs(ordinal) <= limit:
                raise InvalidSchedule(
                    f"BYDAY value {item!r} is out of range; with FREQ={freq}"
                    f"{';BYMONTH' if in_month and freq == 'YEARLY' else ''} a position is 1 to "
                    f"{limit} or -{limit} to -1",
                    rule=text,
                    hint="e.g. BYDAY=2MO (second Monday) or BYDAY=-1FR (last Friday)",
                )
        if (ordinal, weekday) not in result:
            result.append((ordinal, weekday))
    if len({ordinal is None for ordinal, _ in result}) > 1:
        # RFC 5545 adds "1MO,TH" up (first Monday and every Thursday); dateutil intersects the
        # two, so such a rule would silently mean something else here. Refuse it instead.
        raise InvalidSchedule(
            f"BYDAY={value} mixes weekdays with a position and without one, which oncely does "
            "not support",
            rule=text,
            hint="use all positioned (BYDAY=1MO,1TH) or none (BYDAY=MO,TH), or two schedules",
        )
    return tuple(result)


_ALLOWED_WITH = {
    "BYMONTHDAY": ("YEARLY", "MONTHLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY"),
    "BYYEARDAY": ("YEARLY", "HOURLY", "MINUTELY", "SECONDLY"),
    "BYWEEKNO": ("YEARLY",),
}


def _check_combinations(rule: Rule, text: str) -> None:
    present = {
        "BYMONTHDAY": rule.bymonthday,
        "BYYEARDAY": rule.byyearday,
        "BYWEEKNO": rule.byweekno,
    }
    for name, given in present.items():
        if given and rule.freq not in _ALLOWED_WITH[name]:
            raise InvalidSchedule(
                f"{name} cannot be used with FREQ={rule.freq} (RFC 5545)",
                rule=text,
                hint="with FREQ=" + " or ".join(_ALLOWED_WITH[name]),
            )
    others = (
        rule.bysecond, rule.byminute, rule.byhour, rule.byday, rule.bymonthday,
        rule.byyearday, rule.byweekno, rule.bymonth,
    )  # fmt: skip
    if rule.bysetpos and not any(others):
        raise InvalidSchedule(
            "BYSETPOS picks among the times other BY parts produce, and there are none",
            rule=text,
            hint="e.g. FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1 (last weekday of the month)",
        )
    if not _some_date_matches(rule):
        raise InvalidSchedule(
            "no calendar date satisfies BYMONTH, BYMONTHDAY and BYYEARDAY together, so the rule "
            "never fires",
            rule=text,
            hint="e.g. BYMONTH=2;BYMONTHDAY=28 or BYMONTHDAY=-1 for the last day of each month",
        )


def _some_date_matches(rule: Rule) -> bool:
    """True when some date in a leap or a common year passes the month and day-number filters."""
    if not (rule.bymonthday or rule.byyearday):
        return True
    months = set(rule.bymonth or range(1, 13))
    for year in (2024, 2025):  # a leap year and a common one: every month/day shape occurs
        days_in_year = 366 if calendar.isleap(year) else 365
        day = date(year, 1, 1)
        for yearday in range(1, days_in_year + 1):
            if day.month in months:
                length = calendar.monthrange(year, day.month)[1]
                monthday_ok = not rule.bymonthday or any(
                    d == day.day or d == day.day - length - 1 for d in rule.bymonthday
                )
                yearday_ok = not rule.byyearday or any(
                    d == yearday or d == yearday - days_in_year - 1 for d in rule.byyearday
                )
                if monthday_ok and yearday_ok:
                    return True
            day += timedelta(days=1)
    return False
