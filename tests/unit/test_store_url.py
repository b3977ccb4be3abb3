"""Store URLs and what a store that cannot be reached raises."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

import oncely
from oncely import OncelyError, StoreUnavailable
from oncely.errors import ConfigurationError
from oncely.store import PostgresStore, SqliteStore, StoreUrl, open_store


@pytest.mark.parametrize(
    ("url", "dialect", "target"),
    [
        ("sqlite:///oncely.db", "sqlite", "oncely.db"),
        ("sqlite:////var/lib/app/oncely.db", "sqlite", "/var/lib/app/oncely.db"),
        ("postgresql://u@h:5432/db", "postgres", "postgresql://u@h:5432/db"),
        ("postgres://h/db", "postgres", "postgres://h/db"),
    ],
)
def test_urls_name_their_dialect(url: str, dialect: str, target: str) -> None:
    assert StoreUrl.parse(url) == StoreUrl(dialect, target)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "is empty"),
        ("mysql://h/db", "neither SQLite nor PostgreSQL"),
        ("sqlite://oncely.db", "has no file path"),
        ("sqlite:///", "has no file path"),
        ("sqlite:///:memory:", "could not share it"),
    ],
)
def test_bad_urls_say_what_to_use(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        StoreUrl.parse(url)
    assert isinstance(caught.value, OncelyError)
    assert "sqlite:///" in str(caught.value)


def test_open_store_picks_the_implementation() -> None:
    assert isinstance(open_store("sqlite:///x.db"), SqliteStore)
    assert isinstance(open_store("postgresql://h/db"), PostgresStore)


def test_an_unreachable_postgres_is_store_unavailable() -> None:
    store = open_store("postgresql://postgres@127.0.0.1:1/nowhere?connect_timeout=2")
    with pytest.raises(StoreUnavailable, match="cannot connect to PostgreSQL"):
        store.migrate(datetime(2026, 1, 1, tzinfo=UTC))


def test_an_unopenable_sqlite_file_is_store_unavailable() -> None:
    store = open_store("sqlite:////nonexistent-dir/for/oncely.db")
    with pytest.raises(StoreUnavailable, match="SQLite"):
        store.schema_version()


@pytest.mark.parametrize(
    "url",
    [
        "postgresx://bob:secret@db.internal:5432/app",
        "mysql://bob:secret@db.internal/app",
        "postgresql+psycopg://bob:se/cret@db.internal/app",
    ],
)
def test_a_mistyped_scheme_names_the_url_without_its_password(url: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        oncely.App(url)
    message = str(raised.value)
    assert "cret" not in message
    assert "bob@db.internal" in message
    assert "neither SQLite nor PostgreSQL" in message


@pytest.mark.parametrize(
    "url",
    [
        "redis://:pa/ss@127.0.0.1:6379/0",
        "redis://bob:pa/ss@127.0.0.1:6379/0",
        "redis://:p@ss/w?rd#x@127.0.0.1:6379/0",
        "redis://bob:secret@127.0.0.1:6379/0?password=other",
    ],
)
def test_a_redis_url_is_shown_without_its_password_whatever_it_holds(url: str) -> None:
    try:
        shown = repr(oncely.locks.redis(url))
    except ConfigurationError as exc:  # redis-py cannot read it: the error says how to write it
        shown = str(exc)
        assert "percent-encoded" in shown
    assert "127.0.0.1:6379/0" in shown
    for secret in ("pa", "ss@", "w?rd", "secret", "other"):
        assert secret not in shown.replace("password", ""), shown


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        (
            "127.0.0.1:5432/oncely_no_such_database",
            'database "oncely_no_such_database" does not exist',
        ),
        ("127.0.0.1:1/nowhere", "Connection refused"),
    ],
)
def test_an_unreachable_postgres_says_why_at_once(where: str, reason: str) -> None:
    """Before: "cannot connect to PostgreSQL: couldn't get a connection after 5.00 sec", after
    waiting out the pool, whatever the cause."""
    app = oncely.App(f"postgresql://postgres@{where}")
    began = time.monotonic()
    with pytest.raises(StoreUnavailable) as raised:
        app.schedules()
    assert time.monotonic() - began < 3.0
    assert reason in str(raised.value)
    assert str(raised.value).startswith("cannot connect to PostgreSQL at postgres@127.0.0.1")
    app.close()
