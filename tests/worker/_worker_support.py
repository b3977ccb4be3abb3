"""What the worker tests share: a monotonic clock that moves only when the test says so.

Imported by name (``from _worker_support import FakeClock``), as tests/engine does with its own.
"""

from __future__ import annotations


class FakeClock:
    """A stand-in for `time.monotonic`: seconds, starting at an arbitrary large reading."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now
