"""Properties: strict parsing raises nothing but InvalidSchedule; lenient parsing never raises.

Inputs: random text (with an alphabet rich in rule syntax and in Unicode digits), valid rules and
cron expressions mutated by deleting, duplicating and swapping characters, inserting junk tokens,
part names and values, and huge numbers; and for the lenient posture anything at all.
"""

from __future__ import annotations

import dataclasses
import functools
from datetime import UTC, datetime, timedelta

import pytest
from _recurrence_strategies import (
    ALL_ZONES,
    VALID_CRONS,
    VALID_RULES,
    cron_exprs,
    naive_walls,
    rule_bodies,
)
from hypothesis import given
from hypothesis import strategies as st

from oncely import (
    InvalidSchedule,
    cron,
    parse_cron,
    parse_rrule,
    rrule,
    validate_cron,
    validate_rrule,
)
from oncely.recurrence import Rule

PART_NAMES = (
    "FREQ", "INTERVAL", "COUNT", "UNTIL", "BYDAY", "WKST", "BYSECOND", "BYMINUTE", "BYHOUR",
    "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS", "DTSTART", "RRULE", "EXDATE",
    "TZID", "VALUE", "X-NAME", "BYWEEKDAY", "freq", "Until",
)  # fmt: skip
JUNK = (
    "=", ";", ",", ":", "=;", ";;", ",,", "==", "-", "+", "T", "Z", "L", "W", "#", "/", "*", "?",
    " ", "\n", "\r\n", "\t", "\x00", "RRULE:", "DTSTART:", "DTSTART;TZID=Europe/Paris:",
    "DTSTART;TZID=Nope/Zone:", "VALUE=DATE:", "MO", "-1FR", "53MO", "-0", "+0", "0", "00",
    "²", "¹", "³", "①", "٣", "൬", "\U0001d7d9", "Ⅻ", "½", "é", "ß", "\u200b",
    "99999999999999999999", str(2**64), "-99999", "1e9", "0x10", "1_000", "9999", "10000",
    "99991231", "99991231T235959", "99991231T235959Z", "00010101", "00010101T000000",
    "20260230", "20261231T240000Z", "20261231T235960",
    "FREQ=YEARLY", "FREQ=SECONDLY", "INTERVAL=1000000", "COUNT=100000", "UNTIL=20260101",
    "BYSETPOS=366", "BYYEARDAY=-366", "BYWEEKNO=53", "BYDAY=5SU", "BYMONTH=2;BYMONTHDAY=29",
    "@yearly", "@reboot", "*/0", "*/61", "1-0", "0-59/0", "LW", "5L", "FRI#5", "SUN#0", "JAN-DEC",
)  # fmt: skip
ALPHABET = st.sampled_from("FREQ=DAILYWEKMONTHBYSCUNILZXP;:,+-0123456789 \n²¹①٣") | st.characters()


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[str]) -> str:
    text = draw(base)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 7))
        at = draw(st.integers(0, len(text)))
        if kind == 0 and text:  # delete a run
            end = min(len(text), at + draw(st.integers(1, 3)))
            text = text[:at] + text[end:]
        elif kind == 1 and text:  # duplicate a run
            end = min(len(text), at + draw(st.integers(1, 12)))
            text = text[:end] + text[at:end] + text[end:]
        elif kind == 2 and len(text) > 1:  # swap two characters
            i = min(at, len(text) - 2)
            text = text[:i] + text[i + 1] + text[i] + text[i + 2 :]
        elif kind == 3:  # insert a junk token
            text = text[:at] + draw(st.sampled_from(JUNK)) + text[at:]
        elif kind == 4:  # add a part with a random value, at the end or at a part boundary
            name = draw(st.sampled_from(PART_NAMES))
            value = draw(
                st.sampled_from(JUNK)
                | st.integers(-(10**30), 10**30).map(str)
                | st.text(ALPHABET, max_size=6)
            )
            bounds = [i for i, c in enumerate(text) if c == ";"] + [len(text)]
            at = draw(st.sampled_from(bounds))
            text = text[:at] + f";{name}={value}" + text[at:]
        elif kind == 5:  # replace a number with another, possibly huge
            digits = [i for i, c in enumerate(text) if c.isdigit()]
            if digits:
                i = draw(st.sampled_from(digits))
                j = i
                while j < len(text) and text[j].isdigit():
                    j += 1
                number = draw(
                    st.integers(-(10**25), 10**25).map(str)
                    | st.integers(0, 100).map(str)
                    | st.sampled_from(JUNK)
                )
                text = text[:i] + number + text[j:]
        elif kind == 6:  # change case
            text = text.lower() if draw(st.booleans()) else text.swapcase()
        else:  # random characters
            text = text[:at] + draw(st.text(ALPHABET, max_size=4)) + text[at:]
    return text


def _rule_text(body: tuple[str, list[str]]) -> str:
    return ";".join(body[1])


VALID_RULE_TEXT = st.sampled_from(VALID_RULES) | rule_bodies().map(_rule_text)
RULE_INPUTS = (
    mutated(VALID_RULE_TEXT)
    | VALID_RULE_TEXT
    | st.text(ALPHABET, max_size=80)
    | st.lists(st.sampled_from(JUNK + PART_NAMES), max_size=12).map("".join)
)
CRON_INPUTS = (
    mutated(st.sampled_from(VALID_CRONS) | cron_exprs())
    | st.text(ALPHABET, max_size=40)
    | st.lists(st.sampled_from(JUNK), max_size=10).map(" ".join)
)
ANYTHING = (
    RULE_INPUTS
    | CRON_INPUTS
    | st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.binary(max_size=40)
    | st.text(ALPHABET, max_size=40).map(lambda s: s.encode("utf-8", "surrogatepass"))
    | st.lists(st.text(max_size=10), max_size=3)
    | st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)
    | st.just(object())
    | st.just(Rule(text="FREQ=DAILY", freq="DAILY"))
)


@given(
    RULE_INPUTS,
    naive_walls(),
    st.sampled_from(ALL_ZONES),
    st.sampled_from(("shift", "skip")),
    st.sampled_from(("first", "both")),
)
def test_strict_rrule_raises_only_invalid_schedule(
    text: str, start: datetime, zone: str, gap: str, fold: str
) -> None:
    build = functools.partial(rrule, text, start=start, tz=zone, dst_gap=gap, dst_fold=fold)
    refused: InvalidSchedule | None = None
    try:
        rule = validate_rrule(text)
    except InvalidSchedule as exc:
        refused = exc
    if refused is not None:
        assert refused.reason
        with pytest.raises(InvalidSchedule):  # the text the form refused is refused here too
            build()
        return
    assert isinstance(rule, Rule)
    # the normal form reads back as the same rule
    assert validate_rrule(rule.text) == dataclasses.replace(rule, start=None)
    try:
        trigger = build()
    except InvalidSchedule as exc:
        refused = exc
    if refused is not None:
        # The form checks the rule alone; building checks it against its start as well (a
        # DTSTART line besides start=, UNTIL before the start, no date from it, the calendar's
        # ends): a rule the form accepted is refused for nothing else.
        assert "start" in str(refused), refused
        return
    # a rule that builds answers
    t = start.replace(tzinfo=UTC) - timedelta(days=1)
    first = trigger.next_after(t)
    assert first is None or first > t


@given(CRON_INPUTS, st.sampled_from(ALL_ZONES))
def test_strict_cron_raises_only_invalid_schedule(expr: str, zone: str) -> None:
    refused: InvalidSchedule | None = None
    try:
        normal = validate_cron(expr)
    except InvalidSchedule as exc:
        refused = exc
    if refused is not None:
        assert refused.reason
        with pytest.raises(InvalidSchedule):  # refused when building a trigger too
            cron(expr, zone)
        return
    assert isinstance(normal, str)
    assert validate_cron(normal) == normal
    trigger = cron(expr, zone)  # an expression the form accepted builds, in any zone
    t = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)
    first = trigger.next_after(t)
    assert first is None or first > t


@given(ANYTHING)
def test_lenient_parsing_never_raises(value: object) -> None:
    rule = parse_rrule(value)  # type: ignore[arg-type]
    assert rule is None or isinstance(rule, Rule)
    if isinstance(rule, Rule):
        # lenient repairs are stable: the normal form reads back as the same rule
        assert parse_rrule(rule.text) == dataclasses.replace(rule, start=None)
    expr = parse_cron(value)  # type: ignore[arg-type]
    assert expr is None or isinstance(expr, str)
    if expr is not None:
        assert parse_cron(expr) == expr
