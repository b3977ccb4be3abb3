"""What a SQL dialect gives the shared store: connections, binding, rows and its wake-up channel.

`store.base` writes each operation once against these hooks; `store/sqlite.py` and
`store/postgres.py` implement them, each in its own way and without asking which it is.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, TypeVar

from oncely.model import Claim
from oncely.store.claiming import Candidate
from oncely.store.interface import Store

#: A database row by column name, in Python's types: aware datetimes, decoded JSON.
Row = dict[str, Any]
T = TypeVar("T")


class Dialect(Store):
    """The hooks a dialect implements; the store's operations are written over them."""

    _sql: dict[str, str]

    @abstractmethod
    def _reading(self) -> AbstractContextManager[Any]:
        """A connection for reads, in a transaction of its own (or the one this thread joined);
        driver errors leave it translated to `StoreError` and `StoreUnavailable`."""

    @abstractmethod
    def _writing(self, within: Any = None) -> AbstractContextManager[Any]:
        """A connection for one write transaction, committed at the end, rolled back on error;
        or ``within``, the caller's connection, checked and never committed here."""

    @abstractmethod
    def _picked(self, name: str, params: Mapping[str, Any]) -> AbstractContextManager[Any]:
        """``(connection, rows)``: the rows of query ``name`` and a write transaction to change
        them in. Each change must stay conditional on what was read; no rows, no transaction
        (the connection is then None)."""

    @abstractmethod
    def _rows(self, connection: Any, name: str, params: Mapping[str, Any]) -> list[Row]:
        """Run query ``name`` with ``params`` (datetimes bound as the dialect stores them)."""

    @abstractmethod
    def _ids(self, connection: Any, name: str, params: Mapping[str, Any]) -> set[int]:
        """Run query ``name``, whose rows start with an id; return those ids. A booking returns
        a row per occurrence: read whole, by name and in Python's types, those rows were more than
        a quarter of a burst's booking time."""

    @abstractmethod
    def _changed(self, connection: Any, name: str, params: Mapping[str, Any]) -> int:
        """Run statement ``name``, which returns no rows; return how many rows it changed."""

    @abstractmethod
    def _changed_each(self, connection: Any, name: str, params: Sequence[Mapping[str, Any]]) -> int:
        """Run statement ``name`` once per item of ``params``; return the rows changed in all."""

    @abstractmethod
    def _keep_attempt(self, connection: Any, occurrence_id: int, outcome: str) -> None:
        """Keep the attempt that ``book_retry``, ``reclaim`` (retrying) or ``retry_failed`` just
        ended on ``occurrence_id`` in ``oncely_attempts``, as ``outcome``: nothing where those
        statements keep it themselves."""

    @abstractmethod
    def _notify_outcome(self, connection: Any) -> None:
        """Tell open dashboards, at commit, that an outcome was booked (or nothing)."""

    @abstractmethod
    def _notify(self, connection: Any) -> None:
        """Tell watching workers, at commit, that something may be due sooner (or nothing)."""

    @abstractmethod
    def _texts(self, values: Iterable[str]) -> Any:
        """A list of texts as one query parameter."""

    @abstractmethod
    def _ints(self, values: Iterable[int]) -> Any:
        """A list of integers as one query parameter."""

    @abstractmethod
    def _claims(self, claims: Sequence[Claim]) -> dict[str, Any]:
        """The parameters naming each claim's (occurrence id, fence), and the earliest and latest
        of their scheduled times: on a store partitioned by time, those bound where to look."""

    def _before_inserting(self, times: Iterable[datetime]) -> None:
        """Make ready what writing occurrences scheduled at ``times`` needs, before the write
        (PostgreSQL: their days' partitions); nothing by default."""

    def _inserting(self, write: Callable[[], T], within: Any = None) -> T:
        """``write()``, a write of occurrences in a transaction of its own (or ``within``'s);
        a dialect may run it again when it failed for want of what `_before_inserting` makes."""
        return write()

    def _claim(self, claim: Claim) -> dict[str, Any]:
        """The parameters naming one claim's row and attempt (id, scheduled time, fence)."""
        return {
            "id": claim.occurrence_id,
            "scheduled_for": claim.scheduled_for,
            "fence": claim.fence,
        }

    def _candidates_of(self, candidates: Sequence[Candidate | Claim]) -> dict[str, Any]:
        """The parameters naming ``candidates``' (or claims') rows: their ids, and the earliest
        and latest of their scheduled times."""
        times = [c.scheduled_for for c in candidates]
        return {
            "ids": self._ints(c.occurrence_id for c in candidates),
            "earliest": min(times),
            "latest": max(times),
        }

    @abstractmethod
    def _leases_until(self, leases: Sequence[tuple[Claim, datetime]]) -> dict[str, Any]:
        """The parameters of ``extend_leases``: each claim with the time its lease moves to."""

    @abstractmethod
    def _held(
        self, connection: Any, candidates: list[Candidate], schedule_ids: list[int]
    ) -> list[Candidate]:
        """The ``candidates`` whose schedule (of ``schedule_ids``) this transaction now holds
        against concurrent claims."""

    def _row(self, connection: Any, name: str, params: Mapping[str, Any]) -> Row | None:
        """The first row of query ``name``, or None."""
        rows = self._rows(connection, name, params)
        return rows[0] if rows else None
