"""`Trigger.to_spec` and `trigger_from_spec`: JSON round trips that rebuild equal triggers.

A round trip must give a trigger that is equal (`_definition`) and computes the same instances,
including for rule starts inside a DST fold or gap, DTSTART lines and lenient rules. The reader
must refuse every malformed spec with `InvalidSchedule`, and nothing else.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from _recurrence_strategies import (
    ALL_ZONES,
    TRANSITIONS,
    VALID_CRONS,
    VALID_RULES,
    rule_bodies,
    until_text,
)
from hypothesis import assume, given
from hypothesis import strategies as st

import oncely
from oncely import InvalidSchedule
from oncely.recurrence import (
    RRule,
    Rule,
    Trigger,
    at,
    cron,
    every,
    parse_rrule,
    rrule,
    trigger_from_spec,
)

BERLIN = ZoneInfo("Europe/Berlin")
QUERIES = (
    datetime(2020, 1, 1, tzinfo=UTC),
    datetime(2026, 3, 28, 12, tzinfo=UTC),
    datetime(2026, 10, 24, 12, tzinfo=UTC),
)


def lenient(text: str) -> Rule:
    """A rule only the lenient posture accepts (the scheduler's, for stored rules)."""
    rule = parse_rrule(text)
    assert rule is not None
    return rule


def table() -> dict[str, Trigger]:
    """Triggers of every kind, DST zone and policy, bound and unbound rules, starts in DST."""
    day = timedelta(days=1)
    return {
        "cron-utc": cron("0 9 * * MON-FRI"),
        "cron-berlin": cron("30 2 * * *", "Europe/Berlin"),
        "cron-berlin-skip-both": cron(
            "30 2 * * *", "Europe/Berlin", dst_gap="skip", dst_fold="both"
        ),
        "cron-alias": cron("@daily", "America/New_York"),
        "cron-seconds-lord-howe": cron("15 */10 * * * *", "Australia/Lord_Howe", dst_fold="both"),
        "cron-last-friday": cron("0 12 * * 5L", "Asia/Kolkata"),
        "every-second": every(seconds=1),
        "every-90-minutes": every(minutes=90),
        "every-week": every(days=7),
        "every-huge": every(days=900_000),
        "at": at(datetime(2026, 3, 29, 1, tzinfo=UTC)),
        "at-microseconds": at(datetime(2026, 10, 25, 2, 30, 0, 123_456, tzinfo=BERLIN)),
        "at-year-1": at(datetime(1, 1, 1, tzinfo=UTC)),
        "at-year-9999": at(datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)),
        "rrule-weekly": rrule(
            "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=9", datetime(2026, 1, 5), "Europe/Berlin"
        ),
        "rrule-count-across-gap": rrule(
            "FREQ=HOURLY;COUNT=5", datetime(2026, 3, 29), "Europe/Berlin"
        ),
        "rrule-count-skip": rrule(
            "FREQ=HOURLY;COUNT=5", datetime(2026, 3, 29), "Europe/Berlin", dst_gap="skip"
        ),
        "rrule-until-utc": rrule(
            "FREQ=DAILY;UNTIL=20261231T235959Z", datetime(2026, 1, 1, 9), "America/New_York"
        ),
        "rrule-until-date": rrule(
            "FREQ=DAILY;UNTIL=20261026",
            datetime(2026, 10, 20, 2, 30),
            "Europe/Berlin",
            dst_fold="both",
        ),
        "rrule-until-local": rrule(
            "FREQ=YEARLY;BYYEARDAY=1,-1;UNTIL=20300101T000000", datetime(2026, 1, 1), "Asia/Tokyo"
        ),
        "rrule-end": rrule(
            "FREQ=MINUTELY;INTERVAL=15",
            datetime(2026, 3, 29),
            "Europe/Berlin",
            end=datetime(2026, 3, 29, 4, 0, 0, 1, tzinfo=UTC),
        ),
        "rrule-perpetual": rrule(
            "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
            datetime(2026, 1, 1),
            "Europe/Dublin",
            max_span=None,
        ),
        "rrule-short-span": rrule(
            "FREQ=DAILY", datetime(2026, 3, 20), "America/Santiago", max_span=timedelta(days=40)
        ),
        "rrule-sub-second-span": rrule(
            "FREQ=SECONDLY;INTERVAL=30;BYSECOND=0,30",
            datetime(2026, 1, 1),
            max_span=timedelta(seconds=90, microseconds=500_001),
        ),
        "rrule-weekno": rrule(
            "FREQ=YEARLY;BYWEEKNO=1,27;BYDAY=MO;WKST=SU",
            datetime(2026, 1, 1),
            "Australia/Lord_Howe",
        ),
        "rrule-dtstart-tzid": rrule(
            "DTSTART;TZID=Europe/Paris:20260105T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO"
        ),
        "rrule-dtstart-utc": rrule("DTSTART:20260105T080000Z\nRRULE:FREQ=DAILY;COUNT=3"),
        "rrule-dtstart-utc-in-zone": rrule(
            "DTSTART:20261025T003000Z\nFREQ=HOURLY;COUNT=4", tz="Europe/Berlin", dst_fold="both"
        ),
        "rrule-fold-naive": rrule(
            "FREQ=HOURLY;COUNT=4", datetime(2026, 10, 25, 2, 30), "Europe/Berlin", dst_fold="both"
        ),
        "rrule-fold-second": rrule(
            "FREQ=HOURLY;COUNT=4",
            datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
            "Europe/Berlin",
            dst_fold="both",
        ),
        "rrule-fold-second-daily": rrule(
            "FREQ=DAILY",
            datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
            "Europe/Berlin",
            end=datetime(2026, 12, 1, tzinfo=UTC),
        ),
        "rrule-fold-dtstart": rrule(
            "DTSTART;TZID=America/New_York:20261101T013000\nFREQ=DAILY;COUNT=3"
        ),
        "rrule-gap-naive": rrule(
            "FREQ=DAILY;COUNT=3", datetime(2026, 3, 29, 2, 30), "Europe/Berlin"
        ),
        "rrule-gap-naive-skip": rrule(
            "FREQ=DAILY;COUNT=3", datetime(2026, 3, 29, 2, 30), "Europe/Berlin", dst_gap="skip"
        ),
        "rrule-gap-dtstart": rrule(
            "DTSTART;TZID=America/New_York:20260308T023000\nFREQ=DAILY;COUNT=3"
        ),
        "rrule-gap-half-hour": rrule(
            "FREQ=DAILY;UNTIL=20261010", datetime(2026, 10, 4, 2, 15), "Australia/Lord_Howe"
        ),
        "rrule-gap-midnight": rrule(
            "FREQ=DAILY;COUNT=4", datetime(2026, 9, 6, 0, 30), "America/Santiago"
        ),
        "rrule-gap-end-aware": rrule(
            "FREQ=DAILY;COUNT=3", datetime(2026, 3, 29, 1, tzinfo=UTC), "Europe/Berlin"
        ),
        "rrule-lenient": RRule(
            lenient("FREQ=DAILY;COUNT=5;UNTIL=20260301T000000Z;COUNT=3"), datetime(2026, 1, 1)
        ),
        "rrule-lenient-untils": RRule(
            lenient("FREQ=DAILY;UNTIL=20260110;UNTIL=20260105T000000Z"),
            datetime(2026, 1, 1),
            "Europe/Berlin",
        ),
        "rrule-unbound": rrule("FREQ=DAILY;BYHOUR=9", tz="Europe/Berlin", max_span=day * 10),
    }


TABLE = table()


def rebuilt(trigger: Trigger) -> Trigger:
    return trigger_from_spec(json.loads(json.dumps(trigger.to_spec(), allow_nan=False)))


def first_instances(trigger: Trigger, after: datetime, n: int = 20) -> list[Any]:
    if isinstance(trigger, RRule) and trigger.start is None:
        trigger = trigger.with_start(datetime(2026, 3, 29, 2, 30))
    return list(itertools.islice(trigger.instances_after(after), n))


def assert_json_only(value: object) -> None:
    if isinstance(value, dict):
        assert all(isinstance(key, str) for key in value)
        for item in value.values():
            assert_json_only(item)
    elif isinstance(value, list):
        for item in value:
            assert_json_only(item)
    else:
        assert value is None or type(value) in (str, int, float, bool), value


@pytest.mark.parametrize("name", TABLE)
def test_a_json_round_trip_rebuilds_an_equal_trigger(name: str) -> None:
    trigger = TABLE[name]
    spec = trigger.to_spec()
    assert_json_only(spec)
    assert (spec["kind"], spec["v"]) == (trigger.kind, 1)
    again = rebuilt(trigger)
    assert type(again) is type(trigger)
    assert again == trigger
    assert hash(again) == hash(trigger)
    assert again.to_spec() == spec
    for query in QUERIES:
        assert first_instances(again, query) == first_instances(trigger, query)


def test_a_start_in_a_fold_keeps_its_instance() -> None:
    """Berlin 2026-10-25 02:30 happens at 00:30Z and again at 01:30Z; each start is kept."""
    first = TABLE["rrule-fold-naive"]
    second = TABLE["rrule-fold-second"]
    assert isinstance(first, RRule)
    assert isinstance(second, RRule)
    assert first.start == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert second.start == datetime(2026, 10, 25, 1, 30, tzinfo=UTC)
    assert first != second
    again = rebuilt(second)
    assert isinstance(again, RRule)
    assert again.start == second.start
    assert [i.at for i in first_instances(again, QUERIES[0])] == [
        datetime(2026, 10, 25, h, 30, tzinfo=UTC) for h in (1, 2, 3, 4)
    ]


def test_a_start_in_a_gap_keeps_its_wall_time() -> None:
    """Berlin 2026-03-29 02:30 does not exist: the start fires at 01:00Z, later days at 02:30.

    An aware start at 01:00Z (03:00 local) has the same instant but fires at 03:00 on later days:
    the two are different triggers, and the spec keeps which one it was.
    """
    in_gap = TABLE["rrule-gap-naive"]
    at_gap_end = TABLE["rrule-gap-end-aware"]
    assert isinstance(in_gap, RRule)
    assert isinstance(at_gap_end, RRule)
    assert in_gap.start == at_gap_end.start == datetime(2026, 3, 29, 1, tzinfo=UTC)
    assert in_gap != at_gap_end
    assert in_gap.to_spec()["start_wall"] == "2026-03-29T02:30:00"
    assert at_gap_end.to_spec()["start_wall"] == "2026-03-29T03:00:00"
    for trigger, later in ((in_gap, 30), (at_gap_end, 60)):
        instants = [i.at for i in first_instances(rebuilt(trigger), QUERIES[0])]
        assert instants == [
            datetime(2026, 3, 29, 1, tzinfo=UTC),
            datetime(2026, 3, 30, 0, 30, tzinfo=UTC) + timedelta(minutes=later - 30),
            datetime(2026, 3, 31, 0, 30, tzinfo=UTC) + timedelta(minutes=later - 30),
        ]


def test_an_unbound_rule_stays_unbound() -> None:
    trigger = TABLE["rrule-unbound"]
    assert isinstance(trigger, RRule)
    again = rebuilt(trigger)
    assert isinstance(again, RRule)
    assert again.start is None
    start = datetime(2026, 1, 1)
    assert again.with_start(start) == trigger.with_start(start)


def test_the_schedule_name_is_given_to_the_reader() -> None:
    """The name is not in the spec (it only labels a log line); the store passes its key."""
    again = trigger_from_spec(TABLE["rrule-weekly"].to_spec(), schedule="nightly")
    assert isinstance(again, RRule)
    assert again.schedule == "nightly"
    assert again == TABLE["rrule-weekly"]


def test_the_version_1_format() -> None:
    """The stored format: changing it needs a new "v" and a reader for the old one."""
    assert TABLE["cron-berlin"].to_spec() == {
        "kind": "cron", "v": 1, "expr": "30 2 * * *", "tz": "Europe/Berlin",
        "dst_gap": "shift", "dst_fold": "first",
    }  # fmt: skip
    assert TABLE["every-90-minutes"].to_spec() == {"kind": "every", "v": 1, "seconds": 5400}
    assert TABLE["at-microseconds"].to_spec() == {
        "kind": "at", "v": 1, "when": "2026-10-25T00:30:00.123456+00:00"
    }  # fmt: skip
    assert TABLE["rrule-gap-dtstart"].to_spec() == {
        "kind": "rrule", "v": 1, "rule": "FREQ=DAILY;COUNT=3",
        "start": "2026-03-08T07:00:00+00:00", "start_wall": "2026-03-08T02:30:00",
        "tz": "America/New_York", "end": None, "max_span": 366 * 86400,
        "dst_gap": "shift", "dst_fold": "first",
    }  # fmt: skip
    spec = TABLE["rrule-sub-second-span"].to_spec()
    assert (spec["max_span"], spec["max_span_us"]) == (90, 500_001)


def test_the_spec_is_the_same_when_built_again_and_in_other_processes() -> None:
    ours = json.dumps({name: t.to_spec() for name, t in TABLE.items()}, sort_keys=True)
    assert json.dumps({name: t.to_spec() for name, t in table().items()}, sort_keys=True) == ours
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import test_spec; "
        "print(json.dumps({n: t.to_spec() for n, t in test_spec.table().items()}, sort_keys=True))"
    )
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", script, str(Path(__file__).parent)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert done.stdout.strip() == ours


def test_it_is_exported_from_recurrence_only() -> None:
    assert "trigger_from_spec" not in oncely.__all__
    assert not hasattr(oncely, "trigger_from_spec")


GOOD = {name: t.to_spec() for name, t in TABLE.items()}


def changed(name: str, **changes: Any) -> dict[str, Any]:
    spec = {**GOOD[name], **changes}
    return {key: value for key, value in spec.items() if value is not ...}


BAD: dict[str, tuple[object, str]] = {
    "list": ([GOOD["at"]], "not a list"),
    "json text": (json.dumps(GOOD["at"]), "JSON object, not a str"),
    "none": (None, "not null"),
    "no kind": (changed("at", kind=...), "has no kind"),
    "unknown kind": (changed("at", kind="weekly"), "kind 'weekly'"),
    "kind not text": (changed("at", kind=1), "kind 1"),
    "no version": (changed("at", v=...), "has no format version"),
    "version 2": (
        changed("at", v=2),
        "format version 2; this oncely reads version 1 (a newer oncely",
    ),
    "version text": (changed("at", v="1"), "format version '1'"),
    "version bool": (changed("at", v=True), "format version a bool"),
    "missing key": (changed("cron-berlin", tz=...), "lacks key 'tz'"),
    "unknown key": (changed("cron-berlin", hour=9, **{"7": 7}), "unknown keys 'hour', '7'"),
    "other kind's keys": (changed("cron-berlin", kind="every"), "lacks key 'seconds'"),
    "bool seconds": (changed("every-second", seconds=True), "seconds is a bool, not int"),
    "float seconds": (changed("every-second", seconds=1.5), "seconds is a float, not int"),
    "zero seconds": (changed("every-second", seconds=0), "at least one"),
    "huge seconds": (changed("every-second", seconds=10**30), "is not a period"),
    "text span": (changed("rrule-weekly", max_span="366d"), "max_span is a str, not int or null"),
    "negative span": (changed("rrule-weekly", max_span=-1), "not a positive duration"),
    "huge span": (changed("rrule-weekly", max_span=10**30), "impossible value"),
    "stray span_us": (changed("rrule-perpetual", max_span_us=5), "max_span_us=5"),
    "span_us too big": (changed("rrule-weekly", max_span_us=1_000_000), "max_span_us=1000000"),
    "naive when": (changed("at", when="2026-01-01T00:00:00"), "has no UTC offset"),
    "not a time": (changed("at", when="tomorrow"), "'tomorrow' is not an ISO 8601"),
    "before year 1": (changed("at", when="0001-01-01T00:00:00+05:00"), "impossible value"),
    "aware wall": (
        changed("rrule-weekly", start_wall="2026-01-05T09:00:00+01:00"),
        "start_wall '2026-01-05T09:00:00+01:00' has a UTC offset",
    ),
    "start alone": (changed("rrule-weekly", start_wall=None), "one of start and start_wall"),
    "walls disagree": (
        changed("rrule-weekly", start_wall="2026-01-05T10:00:00"),
        "are not one start in Europe/Berlin",
    ),
    "start with microseconds": (
        changed("rrule-weekly", start="2026-01-04T23:00:00.5+00:00"),
        "are not one start",
    ),
    "dtstart in rule": (
        changed("rrule-weekly", rule="DTSTART:20260105T080000Z\nFREQ=DAILY"),
        "has a DTSTART line",
    ),
    "bad rule": (changed("rrule-weekly", rule="FREQ=SOMETIMES"), "FREQ=SOMETIMES"),
    "bad zone": (changed("cron-berlin", tz="Mars/Olympus"), "unknown time zone 'Mars/Olympus'"),
    "bad policy": (changed("cron-berlin", dst_gap="ignore"), "dst_gap='ignore'"),
    "bad cron": (changed("cron-berlin", expr="61 * * * *"), "minute field '61'"),
}


@pytest.mark.parametrize("name", BAD)
def test_a_malformed_spec_is_refused_saying_why(name: str) -> None:
    spec, message = BAD[name]
    with pytest.raises(InvalidSchedule) as caught:
        trigger_from_spec(spec)  # type: ignore[arg-type]
    assert message in str(caught.value)


# -- properties ---------------------------------------------------------------------------------
# Generation is kept cheap (a few draws per example) so that the CI profile's 5,000 examples stay
# within seconds: cron expressions and most rule bodies come from fixed lists (one rule body in
# ten from `rule_bodies`).
# The normal form of generated rule text reading back as the same rule is test_fuzz.py's concern.

BODIES = (
    "FREQ=DAILY",
    "FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
    "FREQ=DAILY;INTERVAL=2;BYHOUR=1,2,3",
    "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=9",
    "FREQ=WEEKLY;INTERVAL=2",
    "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
    "FREQ=MONTHLY;BYMONTHDAY=1,15,-1",
    # Not March alone: in Berlin its 02:30 is always in the gap, and under dst_gap="skip" a rule
    # that never resolves walks dateutil to the year 9999 (about 0.3 s) before it ends.
    "FREQ=YEARLY;BYMONTH=3,10;BYDAY=-1SU;BYHOUR=2;BYMINUTE=30",
    "FREQ=YEARLY;BYWEEKNO=1,27;BYDAY=MO;WKST=SU",
    "FREQ=YEARLY;BYYEARDAY=1,-1",
    "FREQ=HOURLY",
    "FREQ=HOURLY;INTERVAL=3;BYMINUTE=0,30",
    "FREQ=MINUTELY;INTERVAL=15",
    "FREQ=MINUTELY;INTERVAL=7;BYSECOND=5",
)


CRONS = (*VALID_CRONS, "30 2 * * *", "*/20 1-3 * * *", "0,30 0-4 * * SUN", "59 23 * * *")
POLICIES: tuple[tuple[Any, Any], ...] = (
    ("shift", "first"),
    ("shift", "both"),
    ("skip", "first"),
    ("skip", "both"),
)
# Strategies built once: building one inside a composite costs a validation on every draw.
ZONE_CHANGES = {zone: st.sampled_from(changes) for zone, changes in TRANSITIONS.items()}
NEAR_A_CHANGE = st.integers(-7200, 7200)
ANY_SECOND = st.integers(0, 10 * 365 * 86400)
BOOLS = st.booleans()
FOLDS = st.integers(0, 1)
ONE_IN_TEN = st.integers(0, 9)
BODY = st.sampled_from(BODIES)
BOUND = st.sampled_from(("none", "count", "until", "end"))
COUNT = st.integers(1, 30)
UNTIL_AFTER = st.integers(0, 400 * 86400)
UNTIL_KIND = st.sampled_from(("date", "local", "utc"))
END_AFTER = st.integers(0, 10**13)
HOW = st.sampled_from(("naive", "aware", "dtstart"))
SPANS = st.sampled_from((None, timedelta(days=366), timedelta(days=3, microseconds=7)))
POLICY = st.sampled_from(POLICIES)
ZONES = st.sampled_from(ALL_ZONES)
QUERY_AFTER = st.integers(-2 * 86400, 86400)
KINDS = st.sampled_from(("cron", "every", "at", "rrule", "rrule", "rrule"))
CRON = st.sampled_from(CRONS)
PERIOD = st.integers(1, 10**9)
MICRO = st.integers(0, 999_999)


@st.composite
def walls(draw: st.DrawFn, zone: str) -> datetime:
    """A naive wall time: half the time within two hours of a DST change (in gaps and folds)."""
    if zone in ZONE_CHANGES and draw(BOOLS):
        change = draw(ZONE_CHANGES[zone])
        wall = (change - timedelta(seconds=1)).astimezone(ZoneInfo(zone)).replace(tzinfo=None)
        return wall + timedelta(seconds=draw(NEAR_A_CHANGE))
    return datetime(2020, 1, 1) + timedelta(seconds=draw(ANY_SECOND))


@st.composite
def rule_triggers(draw: st.DrawFn, zone: str, wall: datetime) -> Trigger:
    """Rules starting at ``wall`` (naive, aware in either fold, or a DTSTART line), any bound."""
    parts = draw(rule_bodies(dense=False))[1] if draw(ONE_IN_TEN) == 0 else [draw(BODY)]
    end = None
    bound = draw(BOUND)
    if bound == "count":
        parts.append(f"COUNT={draw(COUNT)}")
    elif bound == "until":
        until = wall + timedelta(seconds=draw(UNTIL_AFTER))
        parts.append("UNTIL=" + until_text(draw(UNTIL_KIND), until))
    elif bound == "end":
        end = wall.replace(tzinfo=UTC) + timedelta(microseconds=draw(END_AFTER))
    text = ";".join(parts)
    start: datetime | None = wall
    tz: str | None = zone
    how = draw(HOW)
    if how == "aware":
        start = wall.replace(tzinfo=ZoneInfo(zone), fold=draw(FOLDS))
    elif how == "dtstart":
        text = f"DTSTART;TZID={zone}:{until_text('local', wall)}\n{text}"
        start, tz = None, None
    gap, fold = draw(POLICY)
    return rrule(text, start, tz, end, draw(SPANS), dst_gap=gap, dst_fold=fold)


@st.composite
def triggers(draw: st.DrawFn) -> tuple[Trigger, datetime]:
    """A trigger of any kind and a query instant, both often near a DST change."""
    zone = draw(ZONES)
    wall = draw(walls(zone))
    query = wall.replace(tzinfo=UTC) + timedelta(seconds=draw(QUERY_AFTER))
    kind = draw(KINDS)
    try:
        if kind == "cron":
            gap, fold = draw(POLICY)
            return cron(draw(CRON), zone, dst_gap=gap, dst_fold=fold), query
        if kind == "every":
            return every(seconds=draw(PERIOD)), query
        if kind == "at":
            when = wall.replace(microsecond=draw(MICRO), tzinfo=ZoneInfo(zone), fold=draw(FOLDS))
            return at(when), query
        return draw(rule_triggers(zone, wall)), query
    except InvalidSchedule:
        assume(False)
        raise


@given(triggers())
def test_generated_triggers_round_trip(case: tuple[Trigger, datetime]) -> None:
    trigger, query = case
    again = rebuilt(trigger)
    assert again == trigger
    assert again.to_spec() == trigger.to_spec()
    assert first_instances(again, query, 10) == first_instances(trigger, query, 10)


PLAUSIBLE = st.sampled_from(
    (
        "cron", "every", "at", "rrule", "UTC", "Europe/Berlin", "", " ", "Nope/Zone", "../etc",
        "a\x00b", "x" * 300, "shift", "skip", "first", "both", "2026-03-29T02:30:00",
        "2026-03-29T01:00:00+00:00", "2026-03-29T02:30:00+01:00", "0001-01-01T00:00:00+05:00",
        "9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00", "9999-12-31T23:59:59", "2026-02-30",
        "2026-01-01T00:00:00.5+00:00", "DTSTART:20260105T080000Z\nFREQ=DAILY", "FREQ=DAILY;COUNT=0",
        0, 1, 2, -1, 59, 86_400, 999_999, 1_000_000, 2**31, 2**63, 10**20, -(10**20), 1.5,
        float("nan"), float("inf"), True, False, None, [], {}, ["FREQ=DAILY"], {"kind": "at"},
        *VALID_RULES, *VALID_CRONS,
    )
)  # fmt: skip
VALUES = PLAUSIBLE | st.integers() | st.floats() | st.text(max_size=20)
NOT_A_SPEC = VALUES | st.binary(max_size=4) | st.builds(object) | st.lists(VALUES, max_size=3)
KEY = st.sampled_from(
    sorted({key for spec in GOOD.values() for key in spec} | {"max_span_us", "when2"})
)
NEW_KEY = st.text(max_size=3) | st.integers()
SPEC = st.sampled_from(list(GOOD.values()))
MUTATIONS = st.lists(st.sampled_from(("drop", "replace", "replace", "add", "kind")), max_size=3)
KIND = st.sampled_from(("cron", "every", "at", "rrule"))


@st.composite
def mutated_specs(draw: st.DrawFn) -> object:
    """A good spec with a few keys dropped, replaced or added, or not a spec at all."""
    if draw(ONE_IN_TEN) == 0:
        return draw(NOT_A_SPEC)
    spec: dict[Any, Any] = dict(draw(SPEC))
    for mutation in draw(MUTATIONS):
        if mutation == "drop":
            spec.pop(draw(KEY), None)
        elif mutation == "replace":
            spec[draw(KEY)] = draw(VALUES)
        elif mutation == "add":
            spec[draw(NEW_KEY)] = draw(VALUES)
        else:
            spec["kind"] = draw(KIND)
    return spec


@given(mutated_specs())
def test_any_spec_is_read_or_refused_with_invalid_schedule(spec: object) -> None:
    try:
        trigger = trigger_from_spec(spec)  # type: ignore[arg-type]
    except InvalidSchedule:
        return
    assert rebuilt(trigger) == trigger
