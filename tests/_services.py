"""The plumbing behind the service fixtures in ``conftest.py``.

Where the test services are (URLs from environment variables, defaulting to the local ones), how
to tell whether they answer, and what to do when one does not: outside CI its tests skip and the
session ends with one loud line; under ``CI=true`` they fail. Nothing here is a fixture, so the
decision logic is tested without any service running (``tests/integration/test_services.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NoReturn
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

import psycopg
import pytest
import redis
from psycopg.conninfo import make_conninfo

POSTGRES_URL_ENV = "ONCELY_TEST_POSTGRES_URL"
REDIS_URL_ENV = "ONCELY_TEST_REDIS_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
# A dedicated Redis db, so FLUSHDB around each test cannot clobber anyone using db 0.
DEFAULT_REDIS_DB = 15
DEFAULT_REDIS_URL = f"redis://127.0.0.1:6379/{DEFAULT_REDIS_DB}"
CONNECT_TIMEOUT_S = 2  # libpq's minimum; also used for Redis

POSTGRES_START_HINT = (
    "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
    f" (or set {POSTGRES_URL_ENV})"
)
REDIS_START_HINT = (
    "redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save '' --appendonly no"
    f" (or set {REDIS_URL_ENV})"
)


def in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``CI`` is ``true`` (any case) or ``1``."""
    env = os.environ if environ is None else environ
    return env.get("CI", "").strip().lower() in {"true", "1"}


def postgres_url_from_env(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get(POSTGRES_URL_ENV) or DEFAULT_POSTGRES_URL


def redis_url_from_env(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return with_default_redis_db(env.get(REDIS_URL_ENV) or DEFAULT_REDIS_URL)


def with_default_redis_db(url: str) -> str:
    """``url`` with db ``DEFAULT_REDIS_DB`` selected unless it already names a db."""
    parts = urlsplit(url)
    if "db" in parse_qs(parts.query):
        return url
    if parts.scheme == "unix":  # the path is the socket; the db goes in the query
        return f"{url}{'&' if parts.query else '?'}db={DEFAULT_REDIS_DB}"
    if parts.path.strip("/"):
        return url
    return urlunsplit(parts._replace(path=f"/{DEFAULT_REDIS_DB}"))


def with_database(url: str, dbname: str) -> str:
    """The PostgreSQL URL (or ``key=value`` conninfo) ``url``, pointed at database ``dbname``."""
    if "://" not in url:
        return make_conninfo(url, dbname=dbname)
    return urlunsplit(urlsplit(url)._replace(path="/" + quote(dbname, safe="")))


def template_db_name() -> str:
    """This session's template database (one per process, so parallel sessions never share)."""
    return f"oncely_template_{os.getpid()}"


def redact(url: str) -> str:
    """``url`` without its password, fit for a message."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def check_postgres(url: str) -> str | None:
    """None if PostgreSQL at ``url`` answers a query, else why not."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return _one_line(exc)
    return None


def check_redis(url: str) -> str | None:
    """None if Redis at ``url`` answers PING, else why not."""
    try:
        client = redis.Redis.from_url(
            url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=CONNECT_TIMEOUT_S
        )
    except ValueError as exc:  # a malformed URL
        return _one_line(exc)
    try:
        client.ping()
    except redis.RedisError as exc:
        return _one_line(exc)
    finally:
        client.close()
    return None


def on_unreachable(service: str, reason: str, *, ci: bool, hint: str = "") -> NoReturn:
    """Skip the current test (outside CI) or fail it (under CI): ``service`` did not answer."""
    if ci:
        pytest.fail(
            f"{service} unreachable ({reason}). CI=true, so this is a failure, not a skip."
            + (f" Start it with: {hint}" if hint else ""),
            pytrace=False,
        )
    pytest.skip(f"{service} unreachable ({reason})" + (f": start it with: {hint}" if hint else ""))


@dataclass
class Service:
    """One external service the tests may need, checked at most once per session."""

    name: str
    url: str
    start_hint: str
    probe: Callable[[str], str | None]
    reason: str | None = None
    affected: int = 0  # tests skipped (or failed, under CI) because it did not answer
    _checked: bool = field(default=False, repr=False)

    @property
    def label(self) -> str:
        return f"{self.name} at {redact(self.url)}"

    def require(self, *, ci: bool) -> None:
        """Return if the service answers; otherwise skip or fail the current test."""
        if not self._checked:
            self.reason = self.probe(self.url)
            self._checked = True
        if self.reason is not None:
            self.affected += 1
            on_unreachable(self.label, self.reason, ci=ci, hint=self.start_hint)

    def summary(self, *, ci: bool) -> str | None:
        """The loud end-of-session line, or None if no test was affected."""
        if self.reason is None or self.affected == 0:
            return None
        status, verb = ("FAILED", "failed at setup") if ci else ("SKIPPED", "skipped")
        tests = "test" if self.affected == 1 else "tests"
        return (
            f"{status}: {self.label} unreachable ({self.reason}): {self.affected} {tests} {verb}"
            f" — start it with: {self.start_hint}"
        )


@dataclass
class Services:
    """Everything the service fixtures share during one session (kept in ``config.stash``)."""

    ci: bool
    postgres: Service
    redis: Service

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Services:
        return cls(
            ci=in_ci(environ),
            postgres=Service(
                "PostgreSQL", postgres_url_from_env(environ), POSTGRES_START_HINT, check_postgres
            ),
            redis=Service("Redis", redis_url_from_env(environ), REDIS_START_HINT, check_redis),
        )

    def all(self) -> tuple[Service, ...]:
        return (self.postgres, self.redis)
