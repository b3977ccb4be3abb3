"""The service fixtures work, and the skip-or-fail decision behind them is right."""

from __future__ import annotations

import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
import redis
from psycopg.conninfo import conninfo_to_dict

from _services import (
    DEFAULT_REDIS_DB,
    REDIS_URL_ENV,
    Service,
    in_ci,
    on_unreachable,
    redact,
    redis_url_from_env,
    template_db_name,
    with_database,
    with_default_redis_db,
)

# --- PostgreSQL ---------------------------------------------------------------------------------

_seen_databases: list[str] = []

_COUNT_FOREIGN_TABLES = (  # tables that are not oncely's own schema
    "SELECT count(*) FROM information_schema.tables "
    "WHERE table_schema = 'public' AND table_name NOT LIKE 'oncely%'"
)


def _scalar(conn: psycopg.Connection[tuple[object, ...]], query: str) -> object:
    row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize("run", [1, 2])
def test_postgres_database_is_fresh_private_and_writable(postgres_url: str, run: int) -> None:
    with psycopg.connect(postgres_url) as conn:
        name = _scalar(conn, "SELECT current_database()")
        assert isinstance(name, str)
        assert re.fullmatch(r"t_[0-9a-f]{8}", name)
        assert name not in _seen_databases  # every test gets its own database ...
        # ... and the databases of earlier tests are gone.
        leftovers = conn.execute(
            "SELECT datname FROM pg_database WHERE datname = ANY(%s)", (_seen_databases,)
        ).fetchall()
        assert leftovers == []
        _seen_databases.append(name)

        assert _scalar(conn, _COUNT_FOREIGN_TABLES) == 0  # fresh: the other run's table is not here
        assert _scalar(conn, "SELECT max(version) FROM oncely_migrations") >= 1  # migrated
        conn.execute("CREATE TABLE probe (id integer PRIMARY KEY, note text NOT NULL)")
        conn.execute("INSERT INTO probe VALUES (%s, %s)", (run, f"run {run}"))
        conn.commit()

    with psycopg.connect(postgres_url) as conn:  # a new connection reads what was committed
        assert conn.execute("SELECT id, note FROM probe").fetchall() == [(run, f"run {run}")]


def test_postgres_template_is_untouched(postgres_url: str, request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("postgres") is not None  # added by conftest
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE written_by_test (x integer)")
        conn.commit()
    template_url = with_database(postgres_url, template_db_name())
    with psycopg.connect(template_url) as conn:
        assert _scalar(conn, "SELECT current_database()") == template_db_name()
        assert _scalar(conn, _COUNT_FOREIGN_TABLES) == 0


def test_with_database_keeps_everything_but_the_database() -> None:
    url = "postgresql://u:p%40ss@db.example:6543/maint?sslmode=require&application_name=x"
    assert (
        with_database(url, "t_0123abcd")
        == "postgresql://u:p%40ss@db.example:6543/t_0123abcd?sslmode=require&application_name=x"
    )
    assert conninfo_to_dict(with_database("host=h port=5 dbname=maint", "t_x")) == {
        "host": "h",
        "port": "5",
        "dbname": "t_x",
    }


def test_redact_hides_the_password() -> None:
    assert redact("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"


# --- Redis --------------------------------------------------------------------------------------


def test_redis_round_trip_in_the_dedicated_db(
    redis_url: str, request: pytest.FixtureRequest
) -> None:
    assert request.node.get_closest_marker("redis") is not None  # added by conftest
    with redis.Redis.from_url(redis_url) as client:
        db = int(client.connection_pool.connection_kwargs.get("db", 0))
        assert int(client.client_info()["db"]) == db  # the server agrees which db this is
        if not os.environ.get(REDIS_URL_ENV):
            assert db == DEFAULT_REDIS_DB
        assert client.dbsize() == 0  # flushed before the test
        assert client.set("oncely:test:key", "value")
        assert client.get("oncely:test:key") == b"value"


def test_redis_default_url_is_local_db_15() -> None:
    assert redis_url_from_env({}) == f"redis://127.0.0.1:6379/{DEFAULT_REDIS_DB}"
    assert redis_url_from_env({REDIS_URL_ENV: "redis://h:1"}) == "redis://h:1/15"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379/15"),
        ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/15"),
        ("redis://:pw@h:1/3", "redis://:pw@h:1/3"),
        ("redis://h:1?db=2", "redis://h:1?db=2"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock?db=15"),
    ],
)
def test_redis_url_selects_db_15_unless_it_names_one(url: str, expected: str) -> None:
    assert with_default_redis_db(url) == expected


# --- SQLite -------------------------------------------------------------------------------------


def test_sqlite_url_points_into_tmp_path(sqlite_url: str, tmp_path: Path) -> None:
    assert sqlite_url.startswith("sqlite:///")
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    assert path.is_absolute()
    assert path.parent == tmp_path
    assert not path.exists()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE t (x integer)")
    assert path.exists()


# --- The skip-or-fail decision (no services needed) ---------------------------------------------


def test_unreachable_service_skips_outside_ci() -> None:
    with pytest.raises(pytest.skip.Exception, match=r"PostgreSQL at h unreachable \(refused\)"):
        on_unreachable("PostgreSQL at h", "refused", ci=False, hint="start it")


def test_unreachable_service_fails_under_ci() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"PostgreSQL at h unreachable \(refused\)"):
        on_unreachable("PostgreSQL at h", "refused", ci=True, hint="start it")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("1", True),
        ("", False),
        ("false", False),
        ("0", False),
        ("yes", False),
    ],
)
def test_ci_is_true_or_1(value: str, expected: bool) -> None:
    assert in_ci({"CI": value}) is expected
    assert in_ci({}) is False


@pytest.mark.parametrize("ci", [False, True])
def test_service_is_probed_once_and_every_affected_test_counted(ci: bool) -> None:
    probes: list[str] = []

    def probe(url: str) -> str | None:
        probes.append(url)
        return "connection refused"

    service = Service("PostgreSQL", "postgresql://u:pw@h:5999/test", "start it", probe)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    for _ in range(3):
        with pytest.raises(outcome):
            service.require(ci=ci)
    assert probes == ["postgresql://u:pw@h:5999/test"]
    status = "FAILED" if ci else "SKIPPED"
    verb = "failed at setup" if ci else "skipped"
    assert service.summary(ci=ci) == (
        f"{status}: PostgreSQL at postgresql://u:***@h:5999/test unreachable"
        f" (connection refused): 3 tests {verb} — start it with: start it"
    )


def test_reachable_service_is_silent() -> None:
    service = Service("Redis", "redis://h/15", "start it", lambda url: None)
    service.require(ci=True)
    service.require(ci=False)
    assert service.affected == 0
    assert service.summary(ci=True) is None
