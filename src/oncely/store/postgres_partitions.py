"""PostgreSQL's occurrences by day: a partition made before a row needs it, and retention that
detaches and drops a day's partition instead of deleting its rows (migration 0014).

A partition holds the occurrences scheduled on one UTC day and is named after it
(``oncely_occurrences_p20261207``). Days are made as they are first needed, before the write
that needs them, and ahead of time by housekeeping; a day is dropped once it ends before the
retention cut and holds nothing pending, running or retrying. A day that still does (a schedule
paused for longer than the retention, say) keeps its partition, and its finished rows are
deleted in bounded batches instead.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import psycopg
from psycopg import sql

from oncely.errors import StoreError
from oncely.store.dialect import Dialect, T
from oncely.store.postgres_connections import Connection, PostgresConnections

log = logging.getLogger("oncely")

# Days made ahead by housekeeping: a worker of the previous version (in a rolling deploy) never
# makes one, and its writes for a day not made would fail.
DAYS_AHEAD = 7
# How long a detach or a drop waits for a lock before it is left for the next sweep: the sweep
# runs on the worker's loop, and a day's partition can wait five minutes more.
_LOCK_WAIT = "500ms"
_DAY = re.compile(r"^oncely_occurrences_p(\d{8})$")


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), UTC)


def day_of(name: str) -> date | None:
    """The UTC day a partition named ``name`` holds; None for a table oncely did not name."""
    found = _DAY.match(name)
    if found is None:
        return None
    digits = found.group(1)
    return date(int(digits[:4]), int(digits[4:6]), int(digits[6:]))


def _runs(days: Iterable[date]) -> Iterator[tuple[date, date]]:
    """``days`` as (first, last) runs of consecutive days, in order."""
    ordered = sorted(days)
    while ordered:
        first = last = ordered.pop(0)
        while ordered and ordered[0] == last + timedelta(days=1):
            last = ordered.pop(0)
        yield first, last


class PostgresPartitions(PostgresConnections, Dialect):
    """The day partitions of ``oncely_occurrences``: made before they are written to, detached
    and dropped once past the retention cut."""

    def __init__(self, conninfo: str, max_size: int = 8) -> None:
        super().__init__(conninfo, max_size)
        # Days known to have a partition (made here, or seen made). A day dropped since by
        # another process is before the history horizon, where nothing is written.
        self._days: set[date] = set()
        self._days_lock = threading.Lock()
        self._partitioned: bool | None = None

    def _before_inserting(self, times: Iterable[datetime]) -> None:
        """Make the partitions of the days of ``times`` that have none yet, in a transaction of
        their own: before the write, so that a caller's transaction never holds their locks."""
        days = {moment.astimezone(UTC).date() for moment in times}
        if days <= self._days or self._partitioned is False:
            return
        with self._days_lock:
            missing = days - self._days
            if not missing:
                return
            with self._connect() as connection:
                if self._partitioned is None:
                    row = self._row(connection, "occurrences_partitioned", {})
                    self._partitioned = bool(row and row["partitioned"])
                if not self._partitioned:
                    return  # schema version 13 and before, as a version-13 test worker sees it
                made = self._made_days(connection)
                for first, last in _runs(missing - made):
                    self._add_days(connection, first, last)
            self._days |= made | missing

    def _inserting(self, write: Callable[[], T], within: Any = None) -> T:
        """``write()``, run once more if it found no partition for a row's day: one made by
        another session after this transaction first read the occurrences is not seen by it (it
        keeps the partitions it first saw), and one dropped by another process under this one's
        knowledge of the days is made again. In a caller's transaction (``within``) the error
        stands: only the caller can run its transaction again."""
        try:
            return write()
        except StoreError as exc:
            cause = exc.__cause__
            missing = isinstance(cause, psycopg.errors.CheckViolation) and (
                "no partition of relation" in str(cause)
            )
            if not missing or within is not None:
                raise
        with self._days_lock:
            self._days.clear()
        return write()

    def _made_days(self, connection: Connection) -> set[date]:
        attached = (
            r["name"] for r in self._rows(connection, "partitions", {}) if not r["detached"]
        )
        return {day for day in map(day_of, attached) if day is not None}

    def _add_days(self, connection: Connection, first: date, last: date) -> None:
        params = {"first_at": day_start(first), "last_at": day_start(last)}
        self._rows(connection, "add_partitions", params)

    def make_days_ahead(self, now: datetime) -> None:
        """Make the partitions of today and the `DAYS_AHEAD` days after it."""
        today = now.astimezone(UTC).date()
        self._before_inserting(day_start(today + timedelta(days=n)) for n in range(DAYS_AHEAD + 1))

    def drop_days_before(self, cut: datetime) -> tuple[int, list[date]]:
        """Detach and drop each day's partition that ends by ``cut`` and holds nothing pending,
        running or retrying, oldest first; return (their rows, as the statistics estimate them,
        or counted for a day never analyzed; the days kept because they still hold such
        occurrences). A day whose detach or drop waits
        past `_LOCK_WAIT` for a lock is left for the next call."""
        with self._connect() as connection:
            partitions = self._rows(connection, "partitions", {})
        dropped_rows = 0
        kept: list[date] = []
        for partition in partitions:
            day = day_of(partition["name"])
            if day is None or day_start(day + timedelta(days=1)) > cut:
                continue
            table = sql.Identifier(partition["name"])
            if not (partition["detaching"] or partition["detached"]) and self._holds_live(table):
                kept.append(day)
                continue
            rows = int(partition["rows"])
            if rows < 0:  # never analyzed (and so, small): counted instead
                rows = self._count(table)
            try:
                self._drop(table, partition)
            except psycopg.errors.LockNotAvailable:
                log.info(
                    "oncely: housekeeping: the partition of %s waits for open transactions; "
                    "it is dropped at the next sweep",
                    day.isoformat(),
                )
                continue
            self._days.discard(day)
            dropped_rows += rows
        return dropped_rows, kept

    def _count(self, table: sql.Identifier) -> int:
        with self._connect() as connection:
            row = connection.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
        return int(row["count"]) if row else 0

    def _holds_live(self, table: sql.Identifier) -> bool:
        query = sql.SQL(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE status IN ('pending', 'running', 'retrying'))"
        ).format(table)
        with self._connect() as connection:
            row = connection.execute(query).fetchone()
        return bool(row and row["exists"])

    def _drop(self, table: sql.Identifier, partition: Mapping[str, Any]) -> None:
        """Detach ``table`` from oncely_occurrences (CONCURRENTLY: claims and bookings go on
        meanwhile) and drop it; finish what an earlier sweep left: a detach begun, a drop."""
        with self._session() as session:
            session.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(_LOCK_WAIT)))
            if not partition["detached"]:
                detach = "FINALIZE" if partition["detaching"] else "CONCURRENTLY"
                session.execute(
                    sql.SQL("ALTER TABLE oncely_occurrences DETACH PARTITION {} {}").format(
                        table, sql.SQL(detach)
                    )
                )
            session.execute(sql.SQL("DROP TABLE {}").format(table))
