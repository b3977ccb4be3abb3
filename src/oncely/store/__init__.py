"""Persistence: one `Store` interface, a SQLite and a PostgreSQL implementation, migrations."""

from __future__ import annotations

from oncely.store.interface import Store, Watch
from oncely.store.payloads import MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH, Unreadable
from oncely.store.postgres import PostgresStore
from oncely.store.sqlite import SqliteStore
from oncely.store.url import DEFAULT_URL, StoreUrl

__all__ = [
    "DEFAULT_URL",
    "MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "PostgresStore",
    "SqliteStore",
    "Store",
    "StoreUrl",
    "Unreadable",
    "Watch",
    "open_store",
]


def open_store(url: str) -> Store:
    """Return the store ``url`` names; raise `ConfigurationError` for a URL oncely cannot use."""
    parsed = StoreUrl.parse(url)
    if parsed.dialect == "sqlite":
        return SqliteStore(parsed.target)
    return PostgresStore(parsed.target)
