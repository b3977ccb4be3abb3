"""Locks in the app's own database: the default provider, and the worker's housekeeping lease."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from oncely.errors import LockUnavailable, StoreError
from oncely.locks.provider import LockProvider
from oncely.model import Lease
from oncely.store import Store


class StoreProvider(LockProvider):
    """Leases in the store's ``oncely_leases`` table, timed by the database server's clock
    (PostgreSQL) or, for SQLite, which has none, by ``clock`` (the app's).

    ``store`` is a callable so that a lock made before the app's first use does not open the
    database early.
    """

    def __init__(self, store: Callable[[], Store], clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    def acquire(self, name: str, owner: str, ttl: timedelta) -> Lease | None:
        with _unavailable(name):
            store = self._store()
            return store.acquire_lease(name, owner, ttl, self._now(store))

    def extend(self, lease: Lease, ttl: timedelta) -> Lease | None:
        with _unavailable(lease.name):
            store = self._store()
            return store.renew_lease(lease, self._now(store) + ttl)

    def release(self, lease: Lease, keep: timedelta = timedelta(0)) -> bool:
        with _unavailable(lease.name):
            store = self._store()
            if keep > timedelta(0):
                return store.renew_lease(lease, self._now(store) + keep) is not None
            return store.release_lease(lease)

    def holder(self, name: str) -> Lease | None:
        with _unavailable(name):
            store = self._store()
            return store.lease_holder(name, self._now(store))

    def close(self) -> None:
        """Nothing of its own: the store's connections are the app's, closed with it."""

    def _now(self, store: Store) -> datetime:
        return store.database_now() or self._clock()


@contextmanager
def _unavailable(name: str) -> Iterator[None]:
    """Turns a store failure into `LockUnavailable`: nobody can tell who holds the lock."""
    try:
        yield
    except StoreError as exc:
        raise LockUnavailable(
            f"lock {name!r}: the database cannot be reached ({exc}); what the lock guards "
            "does not run"
        ) from exc
