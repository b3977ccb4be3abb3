"""Session-wide test set-up: Hypothesis profiles and the service fixtures.

Fixtures (URLs come from the environment, defaulting to the local services):

- ``postgres_url``: a throw-away PostgreSQL database per test, cloned from a per-session template
  (``ONCELY_TEST_POSTGRES_URL``, default ``postgresql://postgres@127.0.0.1:5432/test``; that
  database is only used to create and drop the others).
- ``postgres_databases`` (module scope): a function giving one more such database per call.
- ``sqlite_url``: ``sqlite:///<tmp_path>/oncely.db`` (an absolute path, so four slashes).
- ``redis_url``: a Redis db flushed before and after the test (``ONCELY_TEST_REDIS_URL``, default
  ``redis://127.0.0.1:6379/15``; db 15 unless the URL names one).

Tests using ``postgres_url`` / ``redis_url`` get the ``postgres`` / ``redis`` marker automatically.
Each service is checked once per session. If it does not answer, its tests skip and the session
ends with one loud line saying how to start it; under ``CI=true`` (or ``CI=1``) they fail instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
import redis
from hypothesis import settings
from psycopg import sql

from _services import CONNECT_TIMEOUT_S, Services, template_db_name, with_database
from oncely.store import PostgresStore

# Hypothesis: `make test` (and CI) runs HYPOTHESIS_PROFILE=ci; a bare `pytest` runs "dev".
settings.register_profile("ci", max_examples=5000, deadline=None)
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "dev")

_SERVICES = pytest.StashKey[Services]()

# fixture -> marker it implies (markers are declared in pyproject.toml)
_FIXTURE_MARKERS = {
    "postgres_url": "postgres",
    "empty_postgres_url": "postgres",
    "redis_url": "redis",
}


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SERVICES] = Services.from_env()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects, so `-m postgres` sees the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixturenames: list[str] = getattr(item, "fixturenames", [])
        for fixture, marker in _FIXTURE_MARKERS.items():
            if fixture in fixturenames and item.get_closest_marker(marker) is None:
                item.add_marker(getattr(pytest.mark, marker))


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    services = config.stash.get(_SERVICES, None)
    if services is None:
        return
    for service in services.all():
        line = service.summary(ci=services.ci)
        if line is not None:
            terminalreporter.write_line(line, red=services.ci, yellow=not services.ci, bold=True)


def _services(request: pytest.FixtureRequest) -> Services:
    return request.config.stash[_SERVICES]


# --- PostgreSQL ---------------------------------------------------------------------------------


def _admin_connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """An autocommit connection, as CREATE/DROP DATABASE need."""
    return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)


def _prepare_template(conninfo: str) -> None:
    """Migrate the template once, so that each test database is cloned already migrated.

    Closed before returning: PostgreSQL refuses to copy a template that is in use, and the store's
    pool left to the garbage collector kept connections open into the first clone.
    """
    store = PostgresStore(conninfo)
    try:
        store.migrate(datetime.now(UTC))
    finally:
        store.close()


class _TemplateDatabase:
    """The session's template database: created on first use, dropped at session end."""

    def __init__(self, maintenance_url: str) -> None:
        self.maintenance_url = maintenance_url
        self.name = template_db_name()
        self.created = False

    def ensure(self) -> str:
        if not self.created:
            ident = sql.Identifier(self.name)
            with _admin_connect(self.maintenance_url) as conn:
                # A leftover from a crashed session whose pid we now have.
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
                conn.execute(sql.SQL("CREATE DATABASE {}").format(ident))
            self.created = True
            _prepare_template(with_database(self.maintenance_url, self.name))
        return self.name

    def drop(self) -> None:
        if self.created:
            with _admin_connect(self.maintenance_url) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(self.name)
                    )
                )
            self.created = False


@pytest.fixture(scope="session")
def _oncely_pg_template(request: pytest.FixtureRequest) -> Iterator[_TemplateDatabase]:
    # Connects to nothing by itself, so it never skips: `postgres_url` checks reachability per test
    # (counting skips for the summary) before asking it for the template.
    template = _TemplateDatabase(_services(request).postgres.url)
    yield template
    template.drop()


@contextmanager
def _throwaway_database(request: pytest.FixtureRequest, template: str) -> Iterator[str]:
    services = _services(request)
    services.postgres.require(ci=services.ci)
    maintenance_url = services.postgres.url
    name = f"t_{uuid.uuid4().hex[:8]}"
    with _admin_connect(maintenance_url) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    try:
        yield with_database(maintenance_url, name)
    finally:
        with _admin_connect(maintenance_url) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def postgres_url(
    request: pytest.FixtureRequest, _oncely_pg_template: _TemplateDatabase
) -> Iterator[str]:
    """URL of a fresh, migrated database cloned from the session template, dropped after."""
    services = _services(request)
    services.postgres.require(ci=services.ci)
    with _throwaway_database(request, _oncely_pg_template.ensure()) as url:
        yield url


@pytest.fixture(scope="module")
def postgres_databases(
    request: pytest.FixtureRequest, _oncely_pg_template: _TemplateDatabase
) -> Iterator[Callable[[], str]]:
    """A function returning the URL of one more fresh, migrated database per call, all dropped
    after the module: for a module whose tests share servers started once. A call skips (fails,
    under CI) as ``postgres_url`` does when PostgreSQL does not answer."""
    with ExitStack() as stack:

        def another() -> str:
            services = _services(request)
            services.postgres.require(ci=services.ci)  # before the template needs the server
            return stack.enter_context(_throwaway_database(request, _oncely_pg_template.ensure()))

        yield another


@pytest.fixture
def empty_postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """URL of a fresh database oncely has never touched (for migration tests), dropped after."""
    with _throwaway_database(request, "template0") as url:
        yield url


# --- SQLite -------------------------------------------------------------------------------------


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """URL of a not-yet-existing SQLite file in the test's own temporary directory."""
    return f"sqlite:///{tmp_path / 'oncely.db'}"


# --- Redis --------------------------------------------------------------------------------------


def _flushdb(url: str) -> None:
    with redis.Redis.from_url(
        url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=CONNECT_TIMEOUT_S
    ) as client:
        client.flushdb()


@pytest.fixture
def redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """URL of the dedicated Redis db, empty at the start of the test and flushed after it."""
    services = _services(request)
    services.redis.require(ci=services.ci)
    url = services.redis.url
    _flushdb(url)
    try:
        yield url
    finally:
        _flushdb(url)
