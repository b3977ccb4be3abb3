"""Issue 25: ``connection=`` writes inside the caller's open transaction (the transactional
outbox): a rollback leaves no timer, a commit makes it visible and wakes the workers, and a
connection oncely cannot write on is refused clearly."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy
from _engine_support import MakeApp
from sqlalchemy.orm import Session

import oncely
from oncely.store import SqliteStore
from oncely.store.saving import SAVE_CHUNK
from oncely.testing import Clock

Opener = Callable[[], Any]


@pytest.fixture
def open_caller(app: oncely.App) -> Iterator[Opener]:
    """Opens the caller's own connection to the app's database, in a transaction."""
    opened: list[Any] = []

    def open_one() -> Any:
        store = app.store
        connection: Any
        if isinstance(store, SqliteStore):
            connection = sqlite3.connect(store.path, isolation_level=None)
            connection.execute("BEGIN")
        else:
            connection = psycopg.connect(app.url)
            connection.execute("SELECT 1")  # psycopg opens the transaction
        opened.append(connection)
        return connection

    yield open_one
    for connection in opened:
        connection.close()


def _keys(app: oncely.App) -> list[str]:
    return [s.key for s in app.schedules()]


def test_a_rollback_leaves_no_timer_and_a_commit_makes_it_run(
    app: oncely.App, open_caller: Opener, clock: Clock
) -> None:
    ran: list[Any] = []

    @app.job()
    def remind(run: oncely.Run) -> None:
        ran.append(run.payload)

    caller = open_caller()
    app.defer(remind, at=clock(), key="one", payload=1, connection=caller)
    app.defer_many(remind, [{"at": clock(), "key": "two", "payload": 2}], connection=caller)
    app.schedule(remind, oncely.every(hours=1), key="hourly", connection=caller)
    app.schedule_many(remind, [{"trigger": oncely.every(hours=2), "key": "h2"}], connection=caller)
    assert _keys(app) == []  # not committed: nobody else sees it
    caller.rollback()
    assert _keys(app) == []
    assert app.history() == []

    caller = open_caller()
    app.defer(remind, at=clock(), key="one", payload=1, connection=caller)
    cursor = caller.cursor()  # a cursor stands for its connection
    app.defer_many(remind, [{"at": clock(), "key": "two", "payload": 2}], connection=cursor)
    caller.commit()
    assert _keys(app) == ["one", "two"]
    app.tick()
    assert sorted(ran) == [1, 2]


def test_unschedule_pause_resume_and_trigger_follow_the_callers_transaction(
    app: oncely.App, remind: oncely.Job, open_caller: Opener, clock: Clock
) -> None:
    app.schedule(remind, oncely.every(hours=1), key="hourly")
    app.schedule(remind, oncely.every(hours=1), key="paused")
    app.pause("paused")
    caller = open_caller()
    app.unschedule("hourly", connection=caller)
    app.resume("paused", connection=caller)
    app.trigger("paused", connection=caller)
    app.pause("paused", connection=caller)
    # Seen inside the caller's transaction: it reads its own writes.
    with pytest.raises(oncely.UnknownSchedule):
        app.unschedule("hourly", connection=caller)
    caller.rollback()
    assert [(s.key, s.paused) for s in app.schedules()] == [("hourly", False), ("paused", True)]
    assert app.history() == []

    caller = open_caller()
    app.unschedule("hourly", connection=caller)
    app.resume("paused", connection=caller)
    assert app.trigger("paused", connection=caller) == 1
    caller.commit()
    assert [(s.key, s.paused) for s in app.schedules()] == [("paused", False)]
    assert [o.origin for o in app.history()] == ["trigger"]


def test_a_tenant_view_writes_in_the_callers_transaction(
    app: oncely.App, remind: oncely.Job, open_caller: Opener, clock: Clock
) -> None:
    acme = app.for_tenant("acme")
    caller = open_caller()
    acme.defer(remind, at=clock(), key="t", connection=caller)
    acme.defer_many(remind, [{"at": clock(), "key": "u"}], connection=caller)
    caller.commit()
    assert [(s.tenant, s.key) for s in app.schedules()] == [("acme", "t"), ("acme", "u")]


def test_an_item_refused_in_a_later_chunk_leaves_nothing_of_the_call_in_the_transaction(
    app: oncely.App, make_app: MakeApp, open_caller: Opener, clock: Clock
) -> None:
    release = make_app()

    @release.job(oncely.every(minutes=1), name="zz-digest")
    def digest(run: oncely.Run) -> None:
        pass

    release.tick()

    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    # Saved in (tenant, key) order, SAVE_CHUNK at a time: the refused key is in the second.
    at = clock() + timedelta(hours=1)
    items = [{"at": at, "key": f"a{n:05}"} for n in range(SAVE_CHUNK)]
    items.append({"at": at, "key": "zz-digest"})
    caller = open_caller()
    refused = rf"^item {SAVE_CHUNK} \(key 'zz-digest'\): .*declared in code"
    with pytest.raises(oncely.InvalidSchedule, match=refused):
        app.defer_many(remind, items, connection=caller)
    caller.commit()  # a caller that went on after the error
    assert _keys(app) == ["zz-digest"]


def test_a_handler_schedules_follow_up_work_atomically_on_run_connection(
    app: oncely.App, clock: Clock
) -> None:
    attempts: list[int] = []

    @app.job()
    def follow_up(run: oncely.Run) -> None:
        pass

    @app.job(delivery="transactional", retries=2)
    def order(run: oncely.Run) -> None:
        attempts.append(run.attempt)
        app.defer(follow_up, at=run.scheduled_for, key="follow-up", connection=run.connection)
        if run.attempt == 1:
            raise RuntimeError("the order's own write failed")

    app.defer(order, at=clock(), key="order")
    app.tick()
    assert attempts == [1]
    assert _keys(app) == ["order"]  # the failed attempt's follow-up rolled back with it
    clock.advance(timedelta(hours=2))
    app.tick()
    assert attempts == [1, 2]
    assert _keys(app) == ["follow-up", "order"]
    app.tick()
    statuses = {(o.key, o.status) for o in app.history()}
    assert ("follow-up", "succeeded") in statuses


def test_sqlalchemy_connections_and_sessions_are_accepted(
    app: oncely.App, remind: oncely.Job, clock: Clock
) -> None:
    store = app.store
    if isinstance(store, SqliteStore):
        engine = sqlalchemy.create_engine(f"sqlite:///{store.path}")
    else:
        engine = sqlalchemy.create_engine(app.url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as connection:
            connection.begin()
            app.defer(remind, at=clock(), key="rolled-back", connection=connection)
            connection.rollback()
        assert _keys(app) == []
        with engine.begin() as connection:
            app.defer(remind, at=clock(), key="by-connection", connection=connection)
        with Session(engine) as session:
            app.defer_many(remind, [{"at": clock(), "key": "by-session"}], connection=session)
            assert _keys(app) == ["by-connection"]
            session.commit()
        assert _keys(app) == ["by-connection", "by-session"]
        with engine.connect() as idle, pytest.raises(oncely.ConfigurationError, match="begin"):
            app.defer(remind, at=clock(), key="x", connection=idle)
    finally:
        engine.dispose()


class _AppsOwnConnection(psycopg.Connection[Any]):
    """An application's own connection class, as codebases define to add logging or hooks."""


def test_a_psycopg_connection_of_the_callers_own_class_is_accepted(
    postgres_url: str, clock: Clock
) -> None:
    # Told apart by the module of the class alone, a subclass defined outside psycopg was
    # refused as "not a connection oncely can write on".
    app = oncely.App(postgres_url, clock=clock)

    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    caller = _AppsOwnConnection.connect(postgres_url)
    try:
        with caller.transaction():
            app.defer(remind, at=clock(), key="one", connection=caller)
        assert _keys(app) == ["one"]
        with caller.transaction():
            app.defer(remind, at=clock(), key="two", connection=caller.cursor())
        assert _keys(app) == ["one", "two"]
    finally:
        caller.close()
        app.close()


def test_a_commit_wakes_a_worker_watching_on_another_connection(
    postgres_url: str, clock: Clock
) -> None:
    app = oncely.App(postgres_url, clock=clock)
    worker = oncely.App(postgres_url, clock=clock)

    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    woken = threading.Event()
    watch = worker.store.watch(woken.set)
    assert watch is not None
    try:
        caller = psycopg.connect(postgres_url)
        caller.execute("SELECT 1")
        app.defer(remind, at=clock(), key="one", connection=caller)
        assert not woken.wait(0.5)  # NOTIFY is sent at commit, not before
        caller.commit()
        assert woken.wait(5)
        caller.close()
    finally:
        watch.close()
        app.close()
        worker.close()


def test_a_connection_oncely_cannot_write_on_is_refused(
    postgres_url: str, postgres_databases: Callable[[], str], tmp_path: Any, clock: Clock
) -> None:
    pg = oncely.App(postgres_url, clock=clock)
    lite = oncely.App(f"sqlite:///{tmp_path / 'app.db'}", clock=clock)
    for app in (pg, lite):

        @app.job()
        def remind(run: oncely.Run) -> None:
            pass

    elsewhere = psycopg.connect(postgres_databases())
    elsewhere.execute("SELECT 1")
    autocommit = psycopg.connect(postgres_url, autocommit=True)
    other_file = sqlite3.connect(tmp_path / "other.db", isolation_level=None)
    other_file.execute("BEGIN")
    idle_file = sqlite3.connect(tmp_path / "app.db", isolation_level=None)
    assert lite.store.dialect == "sqlite"  # the file exists
    refusals: list[tuple[oncely.App, Any, str]] = [
        (pg, elsewhere, "not on this app's"),
        (pg, autocommit, "autocommit mode and in no transaction"),
        (pg, other_file, "is not a psycopg connection"),
        (pg, object(), "is not a connection oncely can write on"),
        (lite, other_file, "not on this app's"),
        (lite, idle_file, "in no transaction"),
        (lite, autocommit, "is not a sqlite3 connection"),
    ]
    try:
        for app, connection, message in refusals:
            with pytest.raises(oncely.ConfigurationError, match=message):
                app.defer("remind", at=clock(), key="k", connection=connection)
            with pytest.raises(oncely.ConfigurationError, match=message):
                app.pause("k", connection=connection)
        assert pg.schedules() == []
        assert lite.schedules() == []
    finally:
        for connection in (elsewhere, autocommit, other_file, idle_file):
            connection.close()
        pg.close()
        lite.close()


_DJANGO = """
import sys
import django
from django.conf import settings
from django.db import connection, transaction
import oncely

url, dialect = sys.argv[1], sys.argv[2]
if dialect == "sqlite":
    database = {"ENGINE": "django.db.backends.sqlite3", "NAME": url.removeprefix("sqlite:///")}
else:
    from psycopg.conninfo import conninfo_to_dict
    parts = conninfo_to_dict(url)
    database = {"ENGINE": "django.db.backends.postgresql", "NAME": parts["dbname"],
                "HOST": parts.get("host", ""), "PORT": parts.get("port", ""),
                "USER": parts.get("user", "")}
settings.configure(DATABASES={"default": database})
django.setup()
app = oncely.App(url)

@app.job()
def remind(run):
    pass

try:
    app.defer(remind, at=app.now(), key="outside", connection=connection)
except oncely.ConfigurationError as exc:
    print("refused:", exc)
try:
    with transaction.atomic():
        app.defer(remind, at=app.now(), key="rolled-back", connection=connection)
        raise RuntimeError
except RuntimeError:
    pass
with transaction.atomic():
    app.defer(remind, at=app.now(), key="committed", connection=connection)
print("keys:", [s.key for s in app.schedules()])
app.close()
"""


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_djangos_connection_is_accepted_inside_atomic(
    dialect: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if dialect == "sqlite" else "postgres_url")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_DJANGO), url, dialect],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("refused: connection= is Django's connection outside"), lines
    assert lines[1] == "keys: ['committed']", lines
