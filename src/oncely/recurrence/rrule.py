"""`rrule(text, ...)`: RFC 5545 recurrence rules on the wall clock of a time zone."""

from __future__ import annotations

import bisect
import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from dateutil import rrule as du

from oncely.errors import InvalidSchedule
from oncely.recurrence.expansion import Expansion
from oncely.recurrence.lenient import log_once
from oncely.recurrence.rfc5545 import Rule, Until, validate_rrule
from oncely.recurrence.trigger import Trigger
from oncely.recurrence.wallclock import (
    DstFold,
    DstGap,
    Instance,
    Zone,
    as_utc,
    check_policies,
    resolve_walls,
)

logger = logging.getLogger("oncely.recurrence")

DEFAULT_MAX_SPAN = timedelta(days=366)
_CHECKPOINT_EVERY = 256
_CACHED_ANCHORS = 8


class RRule(Trigger):
    """Fires at the wall times an RFC 5545 rule names, in time zone ``tz``.

    Bounds, in order of authority: the rule's own UNTIL (the earliest, if a stored rule carries
    several) or COUNT; else the caller's ``end``; else ``max_span`` after the start, and reaching
    that stop is logged at ERROR, because a series with no end usually is a data bug. Pass
    ``max_span=None`` to declare a rule perpetual on purpose. UNTIL is inclusive; an UNTIL that is
    a date includes that whole local day; an UNTIL without a Z suffix is a wall time in ``tz``.

    ``start`` is the DTSTART: an aware datetime, or a naive one read as wall time in ``tz``. It may
    instead be given in the text as a DTSTART line. A rule needs a start before it can answer;
    `with_start` supplies one (the engine uses the time the schedule was made).

    Under ``dst_gap="skip"`` a skipped time still counts towards COUNT.
    """

    kind = "rrule"

    def __init__(
        self,
        text: str | Rule,
        start: datetime | None = None,
        tz: str | None = None,
        end: datetime | None = None,
        max_span: timedelta | None = DEFAULT_MAX_SPAN,
        *,
        dst_gap: DstGap = "shift",
        dst_fold: DstFold = "first",
        schedule: str | None = None,
    ) -> None:
        self.rule = text if isinstance(text, Rule) else validate_rrule(text)
        check_policies(dst_gap, dst_fold)
        self.dst_gap: DstGap = dst_gap
        self.dst_fold: DstFold = dst_fold
        self.schedule = schedule
        given = self.rule.start
        if given is not None and start is not None:
            raise InvalidSchedule(
                "the start is given twice, as a DTSTART line and as start=",
                rule=self.rule.text,
                hint="keep one of them",
            )
        if given is not None and given.tzid and tz is not None and tz != given.tzid:
            raise InvalidSchedule(
                f"the zone is given twice and differs: DTSTART;TZID={given.tzid} and tz={tz!r}",
                rule=self.rule.text,
                hint="keep one of them",
            )
        self.zone = Zone((given.tzid if given is not None else None) or tz or "UTC")
        if end is not None:
            end = as_utc(end, "end")
        if max_span is not None and max_span <= timedelta(0):
            raise InvalidSchedule(
                f"max_span={max_span} is not a positive duration",
                hint="e.g. max_span=timedelta(days=366), or None for a perpetual rule",
            )
        self.end = end
        self.max_span = max_span
        self.start: datetime | None = None
        self._expansion: Expansion | None = None
        self._stop: datetime | None = None
        self._stop_is_span = False
        self._anchors: OrderedDict[int | None, du.rrule] = OrderedDict()
        self._checkpoints: list[tuple[datetime, int]] = []
        self._lock = threading.Lock()
        wall = _start_wall(self.zone, given, start)
        if wall is not None:
            self._bind(wall)

    def with_start(self, start: datetime) -> RRule:
        """Return this rule with ``start`` as its DTSTART, unless it already has one."""
        if self.start is not None or self.rule.start is not None:
            return self
        return RRule(
            self.rule,
            start,
            self.zone.name,
            self.end,
            self.max_span,
            dst_gap=self.dst_gap,
            dst_fold=self.dst_fold,
            schedule=self.schedule,
        )

    def __repr__(self) -> str:
        start = "" if self.start is None else f", start={self.start.isoformat()}"
        return f"rrule({self.rule.text!r}{start}, tz={self.zone.name!r})"

    def _definition(self) -> tuple[Any, ...]:
        return (
            self.kind,
            self.rule.text,
            self.start,
            self.zone.name,
            self.end,
            self.max_span,
            self.dst_gap,
            self.dst_fold,
        )

    def _bind(self, wall: datetime) -> None:
        expansion = Expansion.of(self.rule, wall)
        if not expansion.could_fire():
            raise InvalidSchedule(
                "no date ever matches this rule from its start, so it never fires",
                rule=self.rule.text,
                hint="check BYSETPOS, BYDAY positions and BYMONTH/BYMONTHDAY against each other",
            )
        first = self.zone.resolve(wall, "shift", "first")[0]
        self.start = first.at
        self._expansion = expansion
        if self.rule.untils:
            self._stop = min(_until_instant(self.zone, u) for u in self.rule.untils)
            if self._stop < self.start:
                raise InvalidSchedule(
                    f"UNTIL is before the start ({self.start.isoformat()}), so the rule never "
                    "fires",
                    rule=self.rule.text,
                    hint="move UNTIL after the start, or the start before UNTIL",
                )
        elif self.rule.count is None:
            if self.end is not None:
                self._stop = self.end
            elif self.max_span is not None:
                self._stop = self.start + self.max_span
                self._stop_is_span = True
        if self.rule.count is not None:
            rr = self._rule_for(None)
            first_wall = next(expansion.walls_after(rr, wall - timedelta(seconds=1)), None)
            if first_wall is not None:
                self._checkpoints.append((first_wall, 1))

    def _instances_after(self, t: datetime) -> Iterator[Instance]:
        expansion = self._expansion
        if expansion is None:
            raise InvalidSchedule(
                "this rule has no start",
                rule=self.rule.text,
                hint="pass start=..., add a DTSTART line, or use rule.with_start(when)",
            )
        after = (t + self.zone.min_offset_near(t)).replace(tzinfo=None)
        ordinals: dict[datetime, int] = {}
        if self.rule.count is None:
            walls = expansion.walls_after(self._rule_for(expansion.anchor_for(after)), after)
        else:
            walls = self._counted_walls_after(expansion, after, ordinals)
        for instance in resolve_walls(self.zone, walls, self.dst_gap, self.dst_fold):
            if self._stop is not None and instance.at > self._stop:
                if self._stop_is_span:
                    self._log_span_stop()
                return
            if instance.at > t:
                ordinal = ordinals.pop(instance.nominal, None)
                yield (
                    instance if ordinal is None else dataclasses.replace(instance, ordinal=ordinal)
                )

    def _rule_for(self, anchor: int | None) -> du.rrule:
        assert self._expansion is not None
        with self._lock:
            cached = self._anchors.get(anchor)
            if cached is not None:
                self._anchors.move_to_end(anchor)
                return cached
        start = self._expansion.dtstart if anchor is None else self._expansion.period_start(anchor)
        built = self._expansion.build(start)
        with self._lock:
            self._anchors[anchor] = built
            if len(self._anchors) > _CACHED_ANCHORS:
                self._anchors.popitem(last=False)
        return built

    def _counted_walls_after(
        self, expansion: Expansion, after: datetime, ordinals: dict[datetime, int]
    ) -> Iterator[datetime]:
        """Yield the walls after ``after`` with their ordinals, resuming from a checkpoint.

        Checkpoints (wall, ordinal) are kept every 256 occurrences as they are first walked, so a
        COUNT rule is walked from its start once and then resumed close to where it is asked.
        """
        count = self.rule.count
        assert count is not None
        with self._lock:
            if not self._checkpoints:
                return
            index = max(0, bisect.bisect_right(self._checkpoints, (after, count + 1)) - 1)
            wall, ordinal = self._checkpoints[index]
        rule = self._rule_for(expansion.anchor_for(wall))
        for current in expansion.walls_after(rule, wall - timedelta(seconds=1)):
            if ordinal > count:
                return
            if ordinal % _CHECKPOINT_EVERY == 0:
                with self._lock:
                    if current > self._checkpoints[-1][0]:
                        self._checkpoints.append((current, ordinal))
            if current > after:
                ordinals[current] = ordinal
                yield current
            ordinal += 1

    def _log_span_stop(self) -> None:
        assert self.start is not None
        assert self.max_span is not None
        log_once(
            logger,
            logging.ERROR,
            f"span:{self.schedule}:{self.rule.text}:{self.start.isoformat()}",
            "recurrence rule %r of schedule %s has neither UNTIL nor COUNT and stopped after "
            "max_span (%s from its start %s); give it an UNTIL or a COUNT, pass end=, or pass "
            "max_span=None if it is meant to run forever",
            self.rule.text,
            self.schedule or "(not bound to a schedule)",
            self.max_span,
            self.start.isoformat(),
        )


def _start_wall(zone: Zone, given: Any, start: datetime | None) -> datetime | None:
    """Return the naive wall time of the start in ``zone``, truncated to whole seconds."""
    if given is not None:
        if given.utc:
            return zone.wall_of(given.value.replace(tzinfo=UTC))[0]
        wall: datetime = given.value
        return wall
    if start is None:
        return None
    if not isinstance(start, datetime):
        raise InvalidSchedule(
            f"start={start!r} is not a datetime", hint="e.g. start=datetime(2026, 1, 5, 9, 0)"
        )
    if start.tzinfo is not None and start.utcoffset() is not None:
        return zone.wall_of(start)[0].replace(microsecond=0)
    return start.replace(tzinfo=None, microsecond=0)


def _until_instant(zone: Zone, until: Until) -> datetime:
    if until.utc:
        return until.value.replace(tzinfo=UTC)
    if until.date_only:
        # Inclusive of the whole day: everything before the next local midnight.
        next_day = zone.resolve(until.value + timedelta(days=1), "shift", "first")[0].at
        return next_day - timedelta(microseconds=1)
    return zone.resolve(until.value, "shift", "both")[-1].at
