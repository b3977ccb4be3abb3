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
from oncely.recurrence.rfc5545 import Rule, Start, Until, validate_rrule
from oncely.recurrence.trigger import SPEC_VERSION, Trigger
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
    `with_start` supplies one (the engine uses the time the schedule was made). Once bound,
    ``start`` is the start's UTC instant and ``start_wall`` the wall time in ``tz`` the rule
    counts from; they name different times only for a start inside a DST gap, which fires at
    the end of the gap while the rule keeps the skipped wall time (02:30 daily stays 02:30).

    Under ``dst_gap="skip"`` a skipped time still counts towards COUNT. Under ``"shift"`` a skipped
    time that lands on the first regular time after the gap fires once, as that regular time: a
    COUNT=5 hourly rule across a spring-forward hour fires four times (ordinals 1, 2, 4, 5).
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
        if max_span is not None and (
            not isinstance(max_span, timedelta) or max_span <= timedelta(0)
        ):
            raise InvalidSchedule(
                f"max_span={max_span} is not a positive duration",
                hint="e.g. max_span=timedelta(days=366), or None for a perpetual rule",
            )
        self.end = end
        self.max_span = max_span
        self.start: datetime | None = None
        self.start_wall: datetime | None = None
        self._expansion: Expansion | None = None
        self._stop: datetime | None = None
        self._stop_is_span = False
        self._anchors: OrderedDict[int | None, du.rrule] = OrderedDict()
        self._checkpoints: list[tuple[datetime, int]] = []
        self._exhausted_after: datetime | None = None
        self._recent: tuple[datetime, int] | None = None
        self._lock = threading.Lock()
        try:
            wall, instant = _start_wall(self.zone, given, start)
            if wall is not None:
                self._bind(wall, instant)
        except OverflowError as exc:
            raise InvalidSchedule(
                "the start is too close to the ends of the calendar (years 1 to 9999) in "
                f"{self.zone.name}",
                rule=self.rule.text,
                hint="start between the years 2 and 9998",
            ) from exc

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

    def with_end(self, end: datetime) -> RRule:
        """Return this rule ending at ``end`` (used only when the rule has no UNTIL or COUNT)."""
        return RRule(
            self.rule,
            None if self.rule.start is not None else self.start,
            None if self.rule.start is not None else self.zone.name,
            end,
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
            # A start in a DST gap and an aware start at the end of that gap share an instant
            # but not the wall time the rule counts from, so they fire at different times.
            self.start_wall,
            self.zone.name,
            self.end,
            self.max_span,
            self.dst_gap,
            self.dst_fold,
        )

    def to_spec(self) -> dict[str, Any]:
        """Return this rule as JSON-ready data that `trigger_from_spec` rebuilds exactly.

        Keys: ``kind`` ("rrule"), ``v``, ``rule`` (the normal text, without a DTSTART line),
        ``start`` (ISO UTC instant) and ``start_wall`` (naive ISO wall time in ``tz``), both
        None while unbound, ``tz``, ``end`` (ISO UTC or None), ``max_span`` (whole seconds or
        None; a sub-second remainder, rare, adds ``max_span_us``), ``dst_gap`` and ``dst_fold``.
        A DTSTART line is kept as ``start``, ``start_wall`` and ``tz``, which say all it said.
        The schedule name, used only in log lines, is not part of the spec.
        """
        span: dict[str, Any] = {"max_span": None}
        if self.max_span is not None:
            seconds, rest = divmod(self.max_span, timedelta(seconds=1))
            span = {"max_span": seconds}
            if rest:
                span["max_span_us"] = rest // timedelta(microseconds=1)
        return {
            "kind": self.kind,
            "v": SPEC_VERSION,
            "rule": self.rule.text,
            "start": None if self.start is None else self.start.isoformat(),
            "start_wall": None if self.start_wall is None else self.start_wall.isoformat(),
            "tz": self.zone.name,
            "end": None if self.end is None else self.end.isoformat(),
            **span,
            "dst_gap": self.dst_gap,
            "dst_fold": self.dst_fold,
        }

    def _bind(self, wall: datetime, instant: datetime | None) -> None:
        expansion = Expansion.of(self.rule, wall)
        if not expansion.could_fire():
            raise InvalidSchedule(
                "no date ever matches this rule from its start, so it never fires",
                rule=self.rule.text,
                hint="check BYSETPOS, BYDAY positions and BYMONTH/BYMONTHDAY against each other",
            )
        # An aware start names one instant even inside a fold, where its wall time names two.
        self.start = instant or self.zone.resolve(wall, "shift", "first")[0].at
        self.start_wall = wall
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
        start = self.start
        assert start is not None
        after = (t + self.zone.min_offset_near(t)).replace(tzinfo=None)
        if self._exhausted_after is not None and after >= self._exhausted_after:
            return
        ordinals: dict[datetime, int] = {}
        if self.rule.count is None:
            walls = expansion.walls_after(self._rule_for(expansion.anchor_for(after)), after)
        else:
            walls = self._counted_walls_after(expansion, after, ordinals)
        last = after
        for instance in resolve_walls(self.zone, walls, self.dst_gap, self.dst_fold):
            last = max(last, instance.nominal)
            if self._stop is not None and instance.at > self._stop:
                if self._stop_is_span:
                    self._log_span_stop()
                return
            if instance.at > t and instance.at >= start:
                ordinal = ordinals.get(instance.nominal)
                yield (
                    instance if ordinal is None else dataclasses.replace(instance, ordinal=ordinal)
                )
        # The walls ran out, or every one after `last` fell in a skipped DST gap; either way that
        # took dateutil a walk to the year 9999 (seconds), and remembering makes later asks free.
        with self._lock:
            if self._exhausted_after is None or last < self._exhausted_after:
                self._exhausted_after = last

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

        Checkpoints (wall, ordinal) are kept every 256 occurrences as they are first walked, and
        the latest occurrence walked past is remembered, so a COUNT rule is walked from its start
        once and then resumed where it was last asked (a scheduler asks in increasing order).
        """
        count = self.rule.count
        assert count is not None
        with self._lock:
            if not self._checkpoints:
                return
            index = max(0, bisect.bisect_right(self._checkpoints, (after, count + 1)) - 1)
            wall, ordinal = self._checkpoints[index]
            recent = self._recent
        if recent is not None and wall < recent[0] <= after:
            wall, ordinal = recent
        rule = self._rule_for(expansion.anchor_for(wall))
        for current in expansion.walls_after(rule, wall - timedelta(seconds=1)):
            if ordinal > count:
                return
            if ordinal % _CHECKPOINT_EVERY == 0:
                with self._lock:
                    if current > self._checkpoints[-1][0]:
                        self._checkpoints.append((current, ordinal))
            if current <= after:
                with self._lock:
                    if self._recent is None or current > self._recent[0]:
                        self._recent = (current, ordinal)
            else:
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


def _start_wall(
    zone: Zone, given: Start | None, start: datetime | None
) -> tuple[datetime | None, datetime | None]:
    """Return the start's naive wall time in ``zone`` (whole seconds) and, when it names one
    instant (aware, or a DTSTART in UTC), that instant."""
    if given is not None:
        if given.utc:
            instant = given.value.replace(tzinfo=UTC)
            return zone.wall_of(instant)[0], instant
        return given.value, None
    if start is None:
        return None, None
    if not isinstance(start, datetime):
        raise InvalidSchedule(
            f"start={start!r} is not a datetime", hint="e.g. start=datetime(2026, 1, 5, 9, 0)"
        )
    if start.tzinfo is not None and start.utcoffset() is not None:
        instant = start.astimezone(UTC).replace(microsecond=0)
        return zone.wall_of(instant)[0], instant
    return start.replace(tzinfo=None, microsecond=0), None


def _until_instant(zone: Zone, until: Until) -> datetime:
    try:
        return _until_instant_unchecked(zone, until)
    except OverflowError:  # an UNTIL at the end of the calendar bounds nothing
        return datetime.max.replace(tzinfo=UTC)


def _until_instant_unchecked(zone: Zone, until: Until) -> datetime:
    if until.utc:
        return until.value.replace(tzinfo=UTC)
    if until.date_only:
        # Inclusive of the whole day: everything before the next local midnight.
        next_day = zone.resolve(until.value + timedelta(days=1), "shift", "first")[0].at
        return next_day - timedelta(microseconds=1)
    return zone.resolve(until.value, "shift", "both")[-1].at
