"""What an app hands the worker it runs: the worker is built from these, and reaches for nothing
else of the app's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from oncely.engine import Engine, Job
from oncely.locks import LockProvider


@dataclass(frozen=True)
class Parts:
    """``engine()`` opens an engine of the worker's own (store connected and migrated; raises
    `StoreUnavailable` while it cannot be): one engine is not safe across threads, and
    ``app.tick()`` may run beside an embedded worker. ``clock`` is the app's time;
    ``sync_clock()`` takes a new sample of the database's; ``locks`` is the app's database as a
    lock provider; ``jobs()`` the jobs declared."""

    engine: Callable[[], Engine]
    clock: Callable[[], datetime]
    sync_clock: Callable[[], None]
    locks: LockProvider
    jobs: Callable[[], Mapping[str, Job]]


class Assembles(Protocol):
    """What a `Worker` is given: `oncely.App`, or anything that assembles the same parts."""

    def worker_parts(self) -> Parts: ...
