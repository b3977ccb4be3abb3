"""``oncely_schedules{job,state}``: the schedules waiting for a person, read from the store.

A counter says a schedule was paused or stopped in some window; this gauge says it still is, so
an alert on it fires until someone acts. It is read when scraped, but at most once every
`MAX_AGE_S`, and never on the scrape's own time past `WAIT_S`: every process of a service
serves /metrics (each web-server process runs a worker), and a store that is down must not make
a scrape fail or hang. Then the last reading is served, ``oncely_schedules_read_age_seconds``
says how old it is, and one WARNING says why (one more line when reading works again).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from oncely.errors import OncelyError

log = logging.getLogger("oncely")

#: Seconds a reading is served before the next scrape reads again.
MAX_AGE_S = 20.0
#: Seconds a scrape waits for a reading it started; past it the last one is served.
WAIT_S = 1.0

Reading = Mapping[tuple[str, str], int]

_STATES = "oncely_schedules"
_AGE = "oncely_schedules_read_age_seconds"
_STATES_HELP = (
    "Schedules waiting for a person, read from the store: state paused, paused_failing "
    "(paused with failed occurrences since its last success, as pause_after leaves it) or "
    "invalid. The same in every process on one database: aggregate with max, not sum."
)
_AGE_HELP = "Seconds since oncely_schedules was read from the store."


class ScheduleStates(Collector):
    """The collector of ``oncely_schedules`` and ``oncely_schedules_read_age_seconds``.

    ``read`` returns the store's `Store.schedule_states`, or None while there is no store to
    read yet (the worker has not opened it); it may raise `OncelyError`. Until a first reading
    neither family is served.
    """

    def __init__(
        self,
        read: Callable[[], Reading | None],
        *,
        max_age: float = MAX_AGE_S,
        wait: float = WAIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._max_age = max_age
        self._wait = wait
        self._clock = clock
        self._lock = threading.Lock()
        self._reading: Reading | None = None
        self._read_at = 0.0
        self._tried_at: float | None = None
        self._reader: threading.Thread | None = None
        self._failing = False

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(_STATES, _STATES_HELP, labels=("job", "state"))
        yield GaugeMetricFamily(_AGE, _AGE_HELP)

    def collect(self) -> Iterator[Metric]:
        reader = self._start_reading()
        if reader is not None:
            reader.join(self._wait)
        with self._lock:
            reading, read_at = self._reading, self._read_at
        if reading is None:
            return
        states = GaugeMetricFamily(_STATES, _STATES_HELP, labels=("job", "state"))
        for (job, state), count in sorted(reading.items()):
            states.add_metric((job, state), count)
        yield states
        yield GaugeMetricFamily(_AGE, _AGE_HELP, value=max(0.0, self._clock() - read_at))

    def _start_reading(self) -> threading.Thread | None:
        """The thread reading the store for this scrape: a new one when the last try is
        `MAX_AGE_S` old, the one still reading, or None when the reading is fresh enough."""
        with self._lock:
            if self._reader is not None and self._reader.is_alive():
                return self._reader
            if self._tried_at is not None and self._clock() - self._tried_at < self._max_age:
                return None
            self._tried_at = self._clock()
            self._reader = threading.Thread(
                target=self._read_now, name="oncely-metrics-states", daemon=True
            )
            self._reader.start()
            return self._reader

    def _read_now(self) -> None:
        try:
            reading = self._read()
        except OncelyError as exc:
            with self._lock:
                first, self._failing = not self._failing, True
            if first:
                log.warning(
                    "oncely: /metrics could not read the schedules' states from the store (%s); "
                    "it serves the last reading, and oncely_schedules_read_age_seconds says "
                    "how old it is",
                    exc,
                )
            return
        if reading is None:
            with self._lock:
                self._tried_at = None  # nothing to read yet: the next scrape tries again
            return
        with self._lock:
            self._reading, self._read_at = dict(reading), self._clock()
            recovered, self._failing = self._failing, False
        if recovered:
            log.info("oncely: /metrics reads the schedules' states from the store again")
