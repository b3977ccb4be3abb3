"""Store URLs: ``sqlite:///relative.db``, ``sqlite:////absolute/path.db``, ``postgresql://...``."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from oncely.arguments import redacted
from oncely.errors import ConfigurationError

DEFAULT_URL = "sqlite:///oncely.db"
_EXAMPLES = "e.g. sqlite:///oncely.db or postgresql://user@host:5432/dbname"


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A parsed store URL: the dialect and what its driver connects with."""

    dialect: str
    target: str

    @classmethod
    def parse(cls, url: str) -> StoreUrl:
        """Read ``url``; raise `ConfigurationError` naming what is wrong."""
        if not isinstance(url, str) or not url.strip():
            raise ConfigurationError(f"store URL {url!r} is empty; {_EXAMPLES}")
        scheme = urlsplit(url).scheme.lower()
        if scheme == "sqlite":
            rest = url[len("sqlite:") :]
            if not rest.startswith("///") or len(rest) == 3:
                raise ConfigurationError(
                    f"SQLite URL {url!r} has no file path; use sqlite:///relative.db or "
                    "sqlite:////absolute/path.db"
                )
            path = rest[3:]
            if path == ":memory:":
                raise ConfigurationError(
                    "an in-memory SQLite database is private to one connection, so workers could "
                    "not share it; use a file, e.g. sqlite:///oncely.db"
                )
            return cls("sqlite", path)
        if scheme in ("postgresql", "postgres"):
            return cls("postgres", url)
        raise ConfigurationError(
            f"store URL {redacted(url)!r} is neither SQLite nor PostgreSQL (scheme {scheme!r}); "
            f"{_EXAMPLES}"
        )
