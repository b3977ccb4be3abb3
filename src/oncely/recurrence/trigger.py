"""The trigger interface: every kind of schedule answers "when next?" the same way."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from oncely.recurrence.wallclock import Instance, as_utc

# datetime's resolution: "after t minus this" is "at or after t".
_RESOLUTION = timedelta(microseconds=1)

SPEC_VERSION = 1
"""The format of `Trigger.to_spec`; `trigger_from_spec` refuses any other."""


class Trigger(ABC):
    """When a schedule fires.

    All times in and out are aware datetimes; results are in UTC. Triggers are immutable values:
    two triggers built from the same definition are equal and compute the same instants, in any
    process, which is what lets independent instances agree on occurrence times.
    """

    kind: str

    @abstractmethod
    def _instances_after(self, t: datetime) -> Iterator[Instance]:
        """Yield the instances strictly after UTC instant ``t`` in increasing order."""

    @abstractmethod
    def _definition(self) -> tuple[Any, ...]:
        """Return what defines this trigger, for equality and hashing."""

    @abstractmethod
    def to_spec(self) -> dict[str, Any]:
        """Return this trigger as JSON-ready data, for a store to keep.

        The dict holds only str, int, bool, None, lists and dicts; ``"kind"`` names the trigger
        and ``"v"`` is `SPEC_VERSION`. Instants are ISO 8601 strings in UTC, microseconds kept.
        The same trigger gives the same dict in every process, and
        `oncely.recurrence.trigger_from_spec` rebuilds from it a trigger equal to this one that
        computes the same instances.
        """

    def instances_after(self, t: datetime) -> Iterator[Instance]:
        """Yield the instances strictly after ``t``, strictly increasing, until the series ends."""
        return self._bounded(as_utc(t))

    def instances_from(self, t: datetime) -> Iterator[Instance]:
        """Yield the instances at or after ``t`` (one firing exactly at ``t`` included)."""
        return self._bounded(_just_before(as_utc(t)))

    def next_instance_after(self, t: datetime) -> Instance | None:
        """Return the first instance strictly after ``t``, or None when the series has ended."""
        return next(self._bounded(as_utc(t)), None)

    def _bounded(self, t: datetime) -> Iterator[Instance]:
        try:
            yield from self._instances_after(t)
        except OverflowError:  # past what datetime can hold (years 1 to 9999): the series ends
            return

    def next_after(self, t: datetime) -> datetime | None:
        """Return the first firing instant strictly after ``t`` (UTC), or None when ended."""
        instance = self.next_instance_after(t)
        return None if instance is None else instance.at

    def instances_between(self, a: datetime, b: datetime) -> Iterator[Instance]:
        """Yield the instances in (a, b]: after ``a``, up to and including ``b``."""
        end = as_utc(b, "b")
        for instance in self._bounded(as_utc(a, "a")):
            if instance.at > end:
                return
            yield instance

    def instances_within(self, a: datetime, b: datetime) -> Iterator[Instance]:
        """Yield the instances in [a, b]: from ``a`` included, up to and including ``b``."""
        return self.instances_between(_just_before(as_utc(a, "a")), b)

    def between(self, a: datetime, b: datetime) -> Iterator[datetime]:
        """Yield the firing instants in (a, b] (UTC), the same ones `next_after` chains through."""
        for instance in self.instances_between(a, b):
            yield instance.at

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trigger):
            return NotImplemented
        return self._definition() == other._definition()

    def __hash__(self) -> int:
        return hash(self._definition())


def _just_before(t: datetime) -> datetime:
    """The instant one resolution step before ``t``, or ``t`` itself at the first instant a
    datetime holds (year 1, where nothing fires): the step raised OverflowError out of
    ``app.backfill(key, datetime.min, ...)``."""
    try:
        return t - _RESOLUTION
    except OverflowError:
        return t
