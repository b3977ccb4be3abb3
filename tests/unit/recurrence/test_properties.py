"""Property: chaining `next_after` is strictly increasing and equals `between` over the same window.

Generated cron expressions, RRULEs (with COUNT, UNTIL, end, max_span, both DST policies) and
`every` periods, in zones with and without daylight saving, from query times anywhere in 1990-2040
and often within two days of a DST change.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from _recurrence_strategies import (
    ALL_ZONES,
    cron_exprs,
    instants_near,
    rule_bodies,
    until_text,
)
from hypothesis import assume, given
from hypothesis import strategies as st

from oncely import InvalidSchedule, cron, every, rrule
from oncely.recurrence import Instance, Trigger

CHAIN = 20
HORIZON = timedelta(days=2 * 366)


@st.composite
def rrule_triggers(draw: st.DrawFn, zone: str, around: datetime) -> Trigger:
    _, parts = draw(rule_bodies(dense=False))
    bound = draw(st.sampled_from(("none", "count", "until", "end")))
    placement = draw(st.sampled_from(("recent", "recent", "future", "decade")))
    if placement == "recent":
        start = around - timedelta(seconds=draw(st.integers(0, 400 * 86400)))
    elif placement == "future":
        start = around + timedelta(seconds=draw(st.integers(0, 30 * 86400)))
    else:
        start = around - timedelta(days=draw(st.integers(3000, 3700)))
    start = start.replace(microsecond=0)
    naive_start = draw(st.booleans())
    given_start = start.astimezone(ZoneInfo(zone)).replace(tzinfo=None) if naive_start else start
    end = None
    if bound == "count":
        parts.append(f"COUNT={draw(st.integers(1, 60))}")
    elif bound == "until":
        kind = draw(st.sampled_from(("date", "local", "utc")))
        wall = start.astimezone(ZoneInfo(zone)).replace(tzinfo=None) + timedelta(
            seconds=draw(st.integers(0, 2 * 366 * 86400))
        )
        parts.append("UNTIL=" + until_text(kind, wall))
    elif bound == "end":
        end = start + timedelta(seconds=draw(st.integers(0, 2 * 366 * 86400)))
    parts = draw(st.permutations(parts))
    max_span = draw(st.sampled_from((None, timedelta(days=366), timedelta(days=40))))
    try:
        return rrule(
            ";".join(parts),
            start=given_start,
            tz=zone,
            end=end,
            max_span=max_span,
            dst_gap=draw(st.sampled_from(("shift", "skip"))),
            dst_fold=draw(st.sampled_from(("first", "both"))),
        )
    except InvalidSchedule:
        assume(False)
        raise


@st.composite
def triggers_with_a_query(draw: st.DrawFn) -> tuple[Trigger, datetime]:
    zone = draw(st.sampled_from(ALL_ZONES))
    a = draw(instants_near(zone))
    kind = draw(st.sampled_from(("cron", "rrule", "rrule", "every")))
    if kind == "every":
        seconds = draw(
            st.sampled_from((1, 60, 90, 420, 3600, 18_000, 86_400)) | st.integers(1, 10 * 86_400)
        )
        return every(seconds=seconds), a
    if kind == "cron":
        try:
            trigger: Trigger = cron(
                draw(cron_exprs()),
                zone,
                dst_gap=draw(st.sampled_from(("shift", "skip"))),
                dst_fold=draw(st.sampled_from(("first", "both"))),
            )
        except InvalidSchedule:
            assume(False)
            raise
        return trigger, a
    return draw(rrule_triggers(zone, a)), a


def consistent(instance: Instance) -> None:
    """An instance's fields describe its instant."""
    zone = ZoneInfo(instance.tz)
    assert instance.at.tzinfo is UTC
    local = instance.at.astimezone(zone)
    assert local.replace(tzinfo=None) == instance.wall
    assert local.fold == instance.fold
    assert instance.local.astimezone(UTC) == instance.at
    if instance.dst is None:
        assert instance.nominal == instance.wall
    elif instance.dst == "gap-shifted":
        assert instance.nominal < instance.wall
    else:
        assert instance.nominal == instance.wall
        assert instance.fold == (1 if instance.dst == "fold-second" else 0)


@given(triggers_with_a_query())
def test_next_after_chain_is_increasing_and_equals_between(
    case: tuple[Trigger, datetime],
) -> None:
    trigger, a = case
    horizon = a + HORIZON
    chain: list[datetime] = []
    t = a
    while len(chain) < CHAIN:
        nxt = trigger.next_after(t)
        if nxt is None or nxt > horizon:
            break
        assert nxt > t
        chain.append(nxt)
        t = nxt
    b = chain[-1] if len(chain) == CHAIN else horizon
    assert all(x < y for x, y in itertools.pairwise(chain))
    assert list(trigger.between(a, b)) == chain
    instances = list(trigger.instances_between(a, b))
    assert [i.at for i in instances] == chain
    for instance in instances:
        consistent(instance)
    if chain:
        # between is (a, b]: from the first instant, that one is left out; up to it, it is in
        assert list(trigger.between(chain[0], b)) == chain[1:]
        assert list(trigger.between(a, chain[0] - timedelta(microseconds=1))) == []
        # each instance is what next_instance_after gives from just before it
        middle = instances[len(instances) // 2]
        assert trigger.next_instance_after(middle.at - timedelta(microseconds=1)) == middle
