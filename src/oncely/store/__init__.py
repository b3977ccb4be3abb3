"""Persistence: one `Store` interface, a SQLite and a PostgreSQL implementation, migrations."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncely.errors import ConfigurationError
from oncely.store.interface import Store, Watch
from oncely.store.payloads import MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH, Unreadable
from oncely.store.sqlite import SqliteStore
from oncely.store.url import DEFAULT_URL, StoreUrl

if TYPE_CHECKING:
    from oncely.store.postgres import PostgresStore

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
    """Return the store ``url`` names; raise `ConfigurationError` for a URL oncely cannot use,
    or one whose driver is not installed (naming the extra that installs it)."""
    parsed = StoreUrl.parse(url)
    if parsed.dialect == "sqlite":
        return SqliteStore(parsed.target)
    return _postgres()(parsed.target)


def _postgres() -> type[PostgresStore]:
    try:
        from oncely.store.postgres import PostgresStore
    except ImportError as exc:
        raise ConfigurationError(
            f"a postgresql:// URL needs the PostgreSQL driver, which is not installed ({exc}); "
            "install it with: pip install 'oncely[postgres]'"
        ) from exc
    return PostgresStore


def __getattr__(name: str) -> object:
    # PostgreSQL's driver is an extra: imported when a PostgreSQL store is, not with oncely.
    if name == "PostgresStore":
        return _postgres()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
