"""The caller's connection behind ``connection=``: the driver's own, whatever holds it.

`App.defer(..., connection=...)` and the other scheduling calls write on the caller's open
transaction. Given a psycopg 3 or sqlite3 connection (or cursor), a SQLAlchemy ``Connection`` or
``Session``, or Django's ``connection``, `driver_connection` finds the psycopg or sqlite3
connection underneath; the store then checks that it is on the app's database and in a
transaction. No framework is imported unless an object of it is passed.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from oncely.errors import ConfigurationError


def driver_connection(given: Any) -> Any:
    """The psycopg or sqlite3 connection ``given`` stands for.

    Raises `ConfigurationError` for an object that is none of those above, a SQLAlchemy
    ``Connection`` in no transaction, or a Django connection outside ``transaction.atomic()``.
    """
    if isinstance(given, sqlite3.Cursor):
        return given.connection
    if isinstance(given, sqlite3.Connection):
        return given
    # Every class it derives from: an application's own subclass of psycopg.Connection lives
    # in the application's module, and was refused when only the class's own module was read.
    homes = {cls.__module__.split(".")[0] for cls in type(given).__mro__}
    if "psycopg" in homes:
        import psycopg

        if isinstance(given, psycopg.Cursor):
            return given.connection
        if isinstance(given, psycopg.Connection):
            return given
    if "sqlalchemy" in homes:
        return _sqlalchemy(given)
    if "django" in homes:
        return _django(given)
    raise ConfigurationError(
        f"connection={given!r} is not a connection oncely can write on; pass a psycopg 3 "
        "connection or cursor, a sqlite3 connection, a SQLAlchemy Connection or Session, or "
        "django.db.connection"
    )


def _sqlalchemy(given: Any) -> Any:
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session

    if isinstance(given, Session):
        given = given.connection()  # begins the session's transaction, as its own writes do
    if not isinstance(given, Connection):
        raise ConfigurationError(
            f"connection={given!r}: of SQLAlchemy, pass a Connection or a Session"
        )
    if not given.in_transaction():
        # Written on, the driver's connection would begin a transaction SQLAlchemy does not
        # know of, rolled back when the connection goes back to its pool.
        raise ConfigurationError(
            "connection= is a SQLAlchemy Connection in no transaction; pass one from "
            "engine.begin(), or call connection.begin() first"
        )
    return _begun(given.connection.driver_connection)


def _django(given: Any) -> Any:
    from django.db import connections
    from django.db.backends.base.base import BaseDatabaseWrapper

    if not isinstance(given, BaseDatabaseWrapper):
        alias = getattr(given, "_alias", None)  # django.db.connection is a proxy of one alias
        if not isinstance(alias, str):
            raise ConfigurationError(
                f"connection={given!r}: of Django, pass django.db.connection or "
                "django.db.connections[alias]"
            )
        given = connections[alias]
    if not given.in_atomic_block:
        raise ConfigurationError(
            "connection= is Django's connection outside a transaction (Django commits each "
            "statement on its own); schedule inside `with transaction.atomic():`"
        )
    given.ensure_connection()
    return _begun(given.connection)


def _begun(driver: Any) -> Any:
    """``driver``, in the transaction its framework has open: Python's sqlite3 (as SQLAlchemy
    drives it) sends its BEGIN only before the first write, so the framework's transaction had
    not begun in the database yet and oncely's writes would have committed on their own."""
    if isinstance(driver, sqlite3.Connection) and not driver.in_transaction:
        driver.execute("BEGIN")
    return driver
