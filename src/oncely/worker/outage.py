"""A run of consecutive failures, visible but not noisy (DESIGN lesson 10).

The worker loop reports every failed tick (or unreachable store) to one `Outage` and waits the
seconds it returns; it reports the next good tick with `recovered()`. The log of an outage is three
kinds of line, whatever its length: the first failure at ERROR with its traceback, one WARNING line
every `report_every` repeats, and one recovery line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("oncely")

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
REPORT_EVERY = 30


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (a driver's multi-line error collapsed), or just ``Type``."""
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


class Outage:
    """Consecutive failures of the worker's tick or store, with backoff and their log lines.

    Not thread-safe: one loop reports to it. Time comes from ``clock``, a monotonic clock in
    seconds. The wait after failure ``n`` (1-based) is ``base_s * 2 ** (n - 1)``, capped at
    ``cap_s``: 0.5, 1, 2, 4, 8, 16, 30, 30, ... with the defaults. There is no jitter: each worker
    retries its own tick, and the cap bounds how long a recovered store waits to be used.
    """

    def __init__(
        self,
        *,
        base_s: float = BACKOFF_BASE_S,
        cap_s: float = BACKOFF_CAP_S,
        report_every: int = REPORT_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._base_s = base_s
        self._cap_s = cap_s
        self._report_every = report_every
        self._clock = clock
        self._failures = 0
        self._since: float | None = None
        self._what = ""

    @property
    def failing(self) -> bool:
        """Whether the last report was a failure."""
        return self._failures > 0

    @property
    def failures(self) -> int:
        """Failures since the outage began; 0 when there is none."""
        return self._failures

    @property
    def since(self) -> float | None:
        """The clock's reading at the first failure of the outage; None when there is none."""
        return self._since

    def failed(self, exc: BaseException, what: str) -> float:
        """Record a failure of ``what`` (``"tick"``, ``"store"``) and return the seconds to wait.

        The first failure of an outage logs at ERROR with ``exc``'s traceback; after it, one
        WARNING line every ``report_every`` repeats says how long it has lasted and the last error.
        """
        now = self._clock()
        if self._since is None:
            self._since = now
        self._failures += 1
        self._what = what
        delay = self.delay(self._failures)
        if self._failures == 1:
            log.error(
                "oncely: %s failed: %s; retrying in %s s, then backing off up to %s s",
                what,
                one_line(exc),
                _seconds(delay),
                _seconds(self._cap_s),
                exc_info=(type(exc), exc, exc.__traceback__),
            )
        elif (self._failures - 1) % self._report_every == 0:
            log.warning(
                "oncely: %s still failing: %d failures in %s s: %s",
                what,
                self._failures,
                _seconds(now - self._since),
                one_line(exc),
            )
        return delay

    def recovered(self) -> None:
        """End the outage, if there is one, with one line saying how long it lasted."""
        if self._since is None:
            return
        # WARNING, not INFO: whoever filters to see the failure lines must also see them end.
        log.warning(
            "oncely: %s recovered after %d failures in %s s",
            self._what,
            self._failures,
            _seconds(self._clock() - self._since),
        )
        self._failures = 0
        self._since = None

    def delay(self, failures: int) -> float:
        """The wait after failure number ``failures`` (1-based) of an outage."""
        exponent = max(0, failures - 1)
        if exponent >= 64:  # far past any cap; keeps the power small
            return self._cap_s
        return float(min(self._cap_s, self._base_s * 2**exponent))


def _seconds(value: float) -> str:
    """A duration for a log line: 0.5, 12.3, 30 (one decimal, none when whole)."""
    return f"{value:.1f}".removesuffix(".0")
