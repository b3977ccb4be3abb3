"""When a failed attempt runs again: exponential backoff with jitter, capped (DESIGN lesson 4)."""

from __future__ import annotations

import random
from datetime import timedelta

BACKOFF_BASE = timedelta(seconds=10)
BACKOFF_CAP = timedelta(hours=1)


def backoff_ceiling(attempt: int) -> timedelta:
    """The longest wait after failed attempt ``attempt`` (1-based): base * 2^(attempt-1), capped."""
    if attempt >= 20:  # 10 s * 2^19 is far past the cap; also keeps the power small
        return BACKOFF_CAP
    ceiling: timedelta = BACKOFF_BASE * (1 << (attempt - 1))
    return min(BACKOFF_CAP, ceiling)


def backoff(attempt: int, rng: random.Random) -> timedelta:
    """The wait after failed attempt ``attempt``: between half the ceiling and the ceiling.

    The jitter spreads the retries of many occurrences that failed together (a database that was
    down for everyone) instead of sending them back at the same instant.
    """
    ceiling = backoff_ceiling(attempt)
    return ceiling / 2 + ceiling / 2 * rng.random()
