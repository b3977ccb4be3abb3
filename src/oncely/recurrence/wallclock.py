"""Wall-clock time in a zone: turning the local times a rule names into instants.

A rule (cron or RRULE) names local wall times such as "02:30 every day". Most map to exactly one
instant. Around a daylight-saving change some map to none (the gap, when clocks jump forward) and
some to two (the fold, when a local hour happens twice). The policies here decide, explicitly:

- ``dst_gap="shift"`` fires a skipped wall time at the first instant after the gap; ``"skip"``
  does not fire it.
- ``dst_fold="first"`` fires a repeated wall time once, at its first instance; ``"both"`` fires it
  at each instance.

Every resolved `Instance` keeps the wall time it fires at, its fold, and the wall time the rule
asked for, so a DST decision can be audited later.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from oncely.errors import InvalidSchedule, NaiveDatetime

DstGap = Literal["shift", "skip"]
DstFold = Literal["first", "both"]
DstNote = Literal["gap-shifted", "fold-first", "fold-second"]

_NEAR = (timedelta(days=-2), timedelta(0), timedelta(days=2))


@dataclass(frozen=True, slots=True)
class Instance:
    """One computed occurrence of a trigger.

    ``at`` is the aware UTC instant it fires. ``wall`` and ``fold`` are the local wall time it fires
    at in zone ``tz`` (naive; ``fold=1`` marks the second of two identical wall times). ``nominal``
    is the wall time the rule asked for: it differs from ``wall`` only when a DST gap shifted it.
    ``dst`` says what daylight saving did to it, None when nothing. ``ordinal`` is the 1-based
    position in a COUNT-bounded series, None elsewhere.
    """

    at: datetime
    wall: datetime
    fold: int
    tz: str
    nominal: datetime
    dst: DstNote | None = None
    ordinal: int | None = None

    @property
    def local(self) -> datetime:
        """The firing time as an aware datetime in the trigger's zone."""
        return self.wall.replace(tzinfo=ZoneInfo(self.tz), fold=self.fold)


def describe_dst(instance: Instance) -> str | None:
    """What daylight saving did to ``instance``, in words; None when nothing."""
    nominal = instance.nominal.strftime("%H:%M")
    if instance.dst == "gap-shifted":
        return f"DST gap: {nominal} does not exist that day; fires when the clocks jump"
    if instance.dst == "fold-first":
        return f"DST fold: {nominal} happens twice; fires at the first only (dst_fold='first')"
    if instance.dst == "fold-second":
        return f"DST fold: {nominal} happens twice; this is the second"
    return None


def check_policies(dst_gap: str, dst_fold: str) -> None:
    """Raise `InvalidSchedule` unless both DST policies are ones oncely knows."""
    if dst_gap not in get_args(DstGap):
        raise InvalidSchedule(
            f"dst_gap={dst_gap!r} is not a DST gap policy", hint='use "shift" or "skip"'
        )
    if dst_fold not in get_args(DstFold):
        raise InvalidSchedule(
            f"dst_fold={dst_fold!r} is not a DST fold policy", hint='use "first" or "both"'
        )


def as_utc(t: datetime, name: str = "t") -> datetime:
    """Return aware ``t`` in UTC; a naive one is refused (`NaiveDatetime`), never guessed at."""
    if not isinstance(t, datetime):
        raise InvalidSchedule(f"{name}={t!r} is not a datetime")
    if t.tzinfo is None or t.utcoffset() is None:
        raise NaiveDatetime(
            f"{name}={t.isoformat()} has no time zone",
            hint="pass an aware datetime, e.g. datetime(2026, 1, 1, tzinfo=UTC)",
        )
    try:
        return t.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise InvalidSchedule(f"{name}={t.isoformat()} is out of range in UTC ({exc})") from exc


class Zone:
    """An IANA time zone that maps wall times to instants under explicit DST policies."""

    __slots__ = ("_gap_transitions", "name", "tzinfo")

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidSchedule(
                f"time zone {name!r} is not a zone name",
                hint='use an IANA name, e.g. "Europe/Berlin"',
            )
        try:
            self.tzinfo = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
            raise InvalidSchedule(
                f"unknown time zone {name!r}",
                hint='use an IANA name such as "Europe/Berlin", "America/New_York" or "UTC"',
            ) from exc
        self.name = name
        self._gap_transitions: dict[date, datetime] = {}

    def __repr__(self) -> str:
        return f"Zone({self.name!r})"

    def wall_of(self, t: datetime) -> tuple[datetime, int]:
        """Return the naive wall time and fold that instant ``t`` shows in this zone."""
        local = t.astimezone(self.tzinfo)
        return local.replace(tzinfo=None), local.fold

    def offset_at(self, t: datetime) -> timedelta:
        """Return the zone's UTC offset at instant ``t``."""
        offset = t.astimezone(self.tzinfo).utcoffset()
        assert offset is not None
        return offset

    def min_offset_near(self, t: datetime) -> timedelta:
        """Return the smallest UTC offset in force within two days of instant ``t``."""
        offsets = []
        for delta in _NEAR:
            try:
                offsets.append(self.offset_at(t + delta))
            except OverflowError:  # within two days of year 1 or 9999
                continue
        return min(offsets)

    def resolve(
        self, nominal: datetime, dst_gap: DstGap, dst_fold: DstFold
    ) -> tuple[Instance, ...]:
        """Map wall time ``nominal`` to the instants it fires at, earliest first (0, 1 or 2)."""
        before = nominal.replace(tzinfo=self.tzinfo, fold=0).utcoffset()
        after = nominal.replace(tzinfo=self.tzinfo, fold=1).utcoffset()
        assert before is not None
        assert after is not None
        if before == after:
            at = (nominal - before).replace(tzinfo=UTC)
            return (Instance(at, nominal, 0, self.name, nominal),)
        if before > after:
            first = Instance(
                (nominal - before).replace(tzinfo=UTC), nominal, 0, self.name, nominal, "fold-first"
            )
            if dst_fold == "first":
                return (first,)
            second = Instance(
                (nominal - after).replace(tzinfo=UTC), nominal, 1, self.name, nominal, "fold-second"
            )
            return (first, second)
        if dst_gap == "skip":
            return ()
        transition = self._gap_transition(nominal, before, after)
        wall = (transition + after).replace(tzinfo=None)
        return (Instance(transition, wall, 0, self.name, nominal, "gap-shifted"),)

    def _gap_transition(self, nominal: datetime, before: timedelta, after: timedelta) -> datetime:
        """Return the instant the clocks jumped over wall time ``nominal``.

        It lies in (nominal - after, nominal - before]; transitions fall on whole seconds, so a
        binary search over seconds finds it. Found transitions are remembered per local date.
        """
        known = self._gap_transitions.get(nominal.date())
        low = (nominal - after).replace(tzinfo=UTC)
        high = (nominal - before).replace(tzinfo=UTC)
        if known is not None and low < known <= high:
            return known
        transition = self._first_with_offset(low, high, after)
        self._gap_transitions[nominal.date()] = transition
        return transition

    def _first_with_offset(self, low: datetime, high: datetime, offset: timedelta) -> datetime:
        """Return the first whole second in (low, high] at which ``offset`` is in force.

        The offset must change exactly once in that span, to ``offset``; transitions fall on
        whole seconds, so a binary search over seconds finds it.
        """
        low_s, high_s = int(low.timestamp()), int(high.timestamp())
        while high_s - low_s > 1:
            middle = (low_s + high_s) // 2
            if self.offset_at(datetime.fromtimestamp(middle, UTC)) == offset:
                high_s = middle
            else:
                low_s = middle
        return datetime.fromtimestamp(high_s, UTC)

    def transitions_between(self, a: datetime, b: datetime) -> list[tuple[datetime, timedelta]]:
        """Return the offset changes in (a, b] as (instant, new offset), found hour by hour."""
        found: list[tuple[datetime, timedelta]] = []
        step = timedelta(hours=1)
        t = a
        offset = self.offset_at(t)
        while t < b:
            nxt = min(t + step, b)
            nxt_offset = self.offset_at(nxt)
            if nxt_offset != offset:
                found.append((self._first_with_offset(t, nxt, nxt_offset), nxt_offset))
                offset = nxt_offset
            t = nxt
        return found


def resolve_walls(
    zone: Zone, walls: Iterable[datetime], dst_gap: DstGap, dst_fold: DstFold
) -> Iterator[Instance]:
    """Yield the instances of increasing wall times, in strictly increasing instant order.

    Two things make this more than a map. In a fold with ``dst_fold="both"`` the second instances
    of the repeated wall times come after the first instances of all of them, so they are held back
    until no later wall time can come before them. And a shifted gap time can land on the same
    instant as the first regular time after the gap: that instant fires once, as the regular one.
    The earliest instant of a wall time never decreases as wall times increase, which is what makes
    holding back safe.
    """
    pending: list[tuple[datetime, int, int, Instance]] = []
    sequence = itertools.count()
    last: datetime | None = None
    for nominal in walls:
        resolved = zone.resolve(nominal, dst_gap, dst_fold)
        if not resolved:
            continue
        floor = resolved[0].at
        while pending and pending[0][0] < floor:
            instance = heapq.heappop(pending)[3]
            if last is None or instance.at > last:
                last = instance.at
                yield instance
        if not pending and len(resolved) == 1 and resolved[0].dst is None:
            if last is None or floor > last:
                last = floor
                yield resolved[0]
            continue
        for instance in resolved:
            rank = 0 if instance.dst is None else 1
            heapq.heappush(pending, (instance.at, rank, next(sequence), instance))
    while pending:
        instance = heapq.heappop(pending)[3]
        if last is None or instance.at > last:
            last = instance.at
            yield instance
