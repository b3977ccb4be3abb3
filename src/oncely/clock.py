"""The default clock: the database's time, so that instances whose own clocks disagree agree on
when an occurrence is due and when a lease expires.

Between samples it is this machine's clock plus the offset last measured against the database
server (a ``SELECT clock_timestamp()``, corrected by half its round trip). SQLite has no server:
there the offset stays zero.
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
    """What ``App(clock=None)`` uses; a clock passed to ``App`` replaces it whole."""

    def __init__(self) -> None:
        self._offset = timedelta(0)
        self._synced_at: float | None = None  # time.monotonic() of the last sample
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        return wall() + self._offset

    @property
    def offset(self) -> timedelta:
        """The database's time minus this machine's, as last measured (0 when too small to tell)."""
        return self._offset

    def sync(self, store: Store, every_s: float = RESYNC_S) -> None:
        """Measure the offset again if the last sample is ``every_s`` old or there is none.

        Raises what the store raises (`StoreUnavailable`): the offset measured before is kept.
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
            self._synced_at = time.monotonic()
        if abs(self._offset) > _NOTABLE and abs(self._offset - previous) > _NOTABLE:
            log.warning(
                "this machine's clock is %.1f s %s the database's; oncely keeps the database's "
                "time (fix the machine's NTP: other programs here see the wrong time)",
                abs(self._offset.total_seconds()),
                "behind" if self._offset > timedelta(0) else "ahead of",
            )
        elif abs(previous) > _NOTABLE and abs(self._offset) <= _NOTABLE:
            log.info("this machine's clock agrees with the database's again")
