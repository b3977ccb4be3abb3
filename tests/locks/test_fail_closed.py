"""A lock whose provider cannot be reached fails closed: what it guards does not run."""

from __future__ import annotations

from datetime import timedelta

import pytest

import oncely
from _proxy import proxied
from oncely.errors import LockUnavailable


def test_the_database_down_means_the_guarded_function_does_not_run(postgres_url: str) -> None:
    with proxied(postgres_url) as (proxy, through):
        app = oncely.App(through)
        ran: list[int] = []
        lock = app.lock("export", at_most=timedelta(seconds=10))

        @lock
        def export() -> None:
            ran.append(1)

        export()
        proxy.cut()
        try:
            with pytest.raises(LockUnavailable, match="does not run"):
                export()
            with pytest.raises(LockUnavailable), lock:
                ran.append(2)
        finally:
            app.close()
    assert ran == [1]


def test_redis_down_means_the_guarded_function_does_not_run(sqlite_url: str) -> None:
    app = oncely.App(sqlite_url)
    lock = app.lock(
        "export",
        at_most=timedelta(seconds=10),
        provider=oncely.locks.redis("redis://127.0.0.1:1/0"),
    )
    ran: list[int] = []

    @lock
    def export() -> None:
        ran.append(1)

    with pytest.raises(LockUnavailable, match="does not run"):
        export()
    assert ran == []
    app.close()
