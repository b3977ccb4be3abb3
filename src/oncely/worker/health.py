"""What `/healthz` answers: 200 only while ticks succeed on time (DESIGN lesson 10)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from oncely.errors import ConfigurationError

OK = 200
FAILING = 503


class Health:
    """The worker's health, reported by its loop and read by the HTTP server's threads.

    `status()` is 200 only while the last tick succeeded and did so at most ``expected_interval``
    seconds ago; before the first tick, after a failed tick and once successful ticks stop coming it
    is 503 with the reason. Time comes from ``clock``, a monotonic clock in seconds.

    Raises `ConfigurationError` when ``expected_interval`` is not a positive number of seconds.
    """

    def __init__(self, expected_interval: float, clock: Callable[[], float] = time.monotonic):
        if not expected_interval > 0:  # also refuses NaN, which would make every tick late
            raise ConfigurationError(
                f"the expected tick interval must be a positive number of seconds, "
                f"not {expected_interval!r}"
            )
        self._expected = expected_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._last_success: float | None = None
        self._failure: str | None = None
        self._stuck: Callable[[], tuple[int, int]] = lambda: (0, 1)

    def stuck_from(self, stuck: Callable[[], tuple[int, int]]) -> None:
        """Read (handlers running past their timeout, handler slots) from ``stuck``: when the
        first reaches the second, every slot's thread is held by a hung handler: unhealthy."""
        self._stuck = stuck

    @property
    def expected_interval(self) -> float:
        """Seconds within which a successful tick must follow the last one."""
        return self._expected

    def tick_succeeded(self) -> None:
        """Record a successful tick, now."""
        now = self._clock()
        with self._lock:
            self._last_success = now
            self._failure = None

    def tick_failed(self, reason: str) -> None:
        """Record a failed tick: `status()` is 503 with ``reason`` until a tick succeeds."""
        with self._lock:
            self._failure = reason

    def status(self) -> tuple[int, dict[str, object]]:
        """The HTTP status code and JSON body for `/healthz`.

        ``(200, {"status": "ok", "last_tick_age_s": age})`` or ``(503, {"status": "failing",
        "reason": ...})``, the reason being one of "last tick failed: <reason>", "no tick has
        succeeded yet", "no successful tick for X s (expected every Y s)", "N of N handler slots
        are held by handlers running past their job's timeout".
        """
        with self._lock:
            last_success, failure = self._last_success, self._failure
        if failure is not None:
            return _failing(f"last tick failed: {failure}")
        if last_success is None:
            return _failing("no tick has succeeded yet")
        age = max(0.0, self._clock() - last_success)
        if age > self._expected:
            return _failing(
                f"no successful tick for {age:.1f} s (expected every {self._expected:g} s)"
            )
        stuck, slots = self._stuck()
        if stuck >= slots:
            return _failing(
                f"{stuck} of {slots} handler slots are held by handlers running past their job's "
                "timeout"
            )
        return OK, {"status": "ok", "last_tick_age_s": round(age, 3)}


def _failing(reason: str) -> tuple[int, dict[str, object]]:
    return FAILING, {"status": "failing", "reason": reason}
