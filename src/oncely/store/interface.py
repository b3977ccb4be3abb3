"""The one persistence interface, at the level of business operations."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime


class Store(ABC):
    """Where schedules, occurrences and leases live.

    Two implementations, one per dialect: `SqliteStore` and `PostgresStore`. Every method that
    depends on the time takes it as ``now``; driver errors come out as `StoreUnavailable` (the
    store cannot be reached) and never as the driver's own exceptions.
    """

    dialect: str

    @abstractmethod
    def migrate(self, now: datetime) -> list[int]:
        """Apply the migrations this database has not seen; return the versions applied.

        Safe when several processes start together: they are lined up (an advisory lock on
        PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite) and each version is applied exactly once, in
        the same transaction that records it. Raises `StoreUnavailable`.
        """

    @abstractmethod
    def schema_version(self) -> int:
        """Return the newest migration applied, 0 for a database oncely has never touched."""

    @abstractmethod
    def close(self) -> None:
        """Release connections; the store is not used afterwards."""
