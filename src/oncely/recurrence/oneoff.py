"""`at(when)`: a single instant."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from oncely.recurrence.trigger import SPEC_VERSION, Trigger
from oncely.recurrence.wallclock import Instance, as_utc


class At(Trigger):
    """Fires once, at the aware instant ``when``; nothing after it."""

    kind = "at"
    __slots__ = ("when",)

    def __init__(self, when: datetime) -> None:
        self.when = as_utc(when, "when")

    def __repr__(self) -> str:
        return f"at({self.when.isoformat()})"

    def _definition(self) -> tuple[Any, ...]:
        return (self.kind, self.when)

    def to_spec(self) -> dict[str, Any]:
        """Return ``{"kind": "at", "v": 1, "when": <ISO 8601 in UTC, microseconds kept>}``."""
        return {"kind": self.kind, "v": SPEC_VERSION, "when": self.when.isoformat()}

    @property
    def instance(self) -> Instance:
        """The one instance, at ``when``."""
        wall = self.when.replace(tzinfo=None)
        return Instance(self.when, wall, 0, "UTC", wall)

    def _instances_after(self, t: datetime) -> Iterator[Instance]:
        if self.when > t:
            yield self.instance
