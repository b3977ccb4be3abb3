"""The default clock: the database's time, so that instances whose own clocks disagree agree on
when an occurrence is due and when a lease expires.

A sample is the database server's time (a ``SELECT clock_timestamp()``, corrected by half its
round trip); between samples the time moves on by `time.monotonic`, never by this machine's
wall clock. SQLite has no server: there a sample is the machine's clock, read once per sample.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from oncely.store import Store

log = logging.getLogger("oncely.clock")

#: How often a running worker measures the offset again.
RESYNC_S = 60.0
#: An offset larger than this is logged: it is this machine's clock that is wrong.
_NOTABLE = timedelta(seconds=1)
#: Offsets this small, or smaller than the sample's round trip, are left uncorrected: a sample is
#: only good to half its round trip (on one machine, where the true offset is 0, the estimate came
#: out a few ms off under load and occurrences started before their time by the machine's
#: clock), and they are too small to matter to a lease or a due time.
_NEGLIGIBLE = timedelta(milliseconds=100)


def wall() -> datetime:
    """This machine's clock. The fault suite replaces it to play a machine whose clock is off."""
    return datetime.now(UTC)


class DatabaseClock:
    """What ``App(clock=None)`` uses; a clock passed to ``App`` replaces it whole.

    Its time is the last sample of the database's plus what `time.monotonic` has counted since,
    so a step of this machine's clock (an NTP correction, an operator's ``date -s``) changes
    nothing: the machine's clock is read only when a sample is taken. Stepped an hour ahead, it
    made every live lease look expired and due work look missed until the next sample. Before
    the first sample it is the machine's clock.
    """

    def __init__(self) -> None:
        self._offset = timedelta(0)
        # (time at the sample as POSIX seconds, time.monotonic() then); None until the first.
        self._sample: tuple[float, float] | None = None
        self._synced_at: float | None = None  # time.monotonic() of the last sample
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        sample = self._sample
        if sample is None:
            return wall()
        at, counted_from = sample
        # Read several times per occurrence run (the lease check, misfire, the lag):
        # `at + timedelta(seconds=...)` parsed its keyword arguments on every read, a handler
        # thread's largest cost after the handler itself.
        return datetime.fromtimestamp(at + (time.monotonic() - counted_from), UTC)

    @property
    def offset(self) -> timedelta:
        """The database's time minus this machine's, as last measured (0 when too small to tell)."""
        return self._offset

    def sync(self, store: Store, every_s: float = RESYNC_S) -> None:
        """Take a sample again if the last is ``every_s`` old or there is none.

        A sample that disagrees with the time kept since the one before by more than a second
        is logged, and taken. Raises what the store raises (`StoreUnavailable`): the sample
        taken before is kept.
        """
        with self._lock:
            if self._synced_at is not None and time.monotonic() - self._synced_at < every_s:
                return
            sent, started = wall(), time.monotonic()
            server = store.database_now()
            round_trip = time.monotonic() - started
            previous = self._offset
            measured = (
                timedelta(0)
                if server is None
                else server - (sent + timedelta(seconds=round_trip / 2))
            )
            uncertain = max(_NEGLIGIBLE, timedelta(seconds=round_trip))
            self._offset = measured if abs(measured) > uncertain else timedelta(0)
            midway = started + round_trip / 2
            at = sent + timedelta(seconds=round_trip / 2) + self._offset
            kept = self._sample
            self._sample = (at.timestamp(), midway)
            self._synced_at = time.monotonic()
        if kept is not None:
            drift_s = self._sample[0] - (kept[0] + (midway - kept[1]))
            if abs(drift_s) > _NOTABLE.total_seconds():
                log.warning(
                    "the time kept since the last sample is %.1f s %s the new sample; oncely "
                    "takes the new one (the database's clock, or this machine's, was stepped)",
                    abs(drift_s),
                    "behind" if drift_s > 0 else "ahead of",
                )
        if abs(self._offset) > _NOTABLE and abs(self._offset - previous) > _NOTABLE:
            log.warning(
                "this machine's clock is %.1f s %s the database's; oncely keeps the database's "
                "time (fix the machine's NTP: other programs here see the wrong time)",
                abs(self._offset.total_seconds()),
                "behind" if self._offset > timedelta(0) else "ahead of",
            )
        elif abs(previous) > _NOTABLE and abs(self._offset) <= _NOTABLE:
            log.info("this machine's clock agrees with the database's again")
