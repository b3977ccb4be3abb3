"""While PostgreSQL cannot be reached, the outage is reported once, by oncely (DESIGN lesson 10):
psycopg's pool does not add a warning per failed connection attempt of oncely's pool."""

from __future__ import annotations

import logging

import pytest

import oncely
from _proxy import TcpProxy


def test_the_pool_does_not_log_each_failed_connection_of_oncelys_pool(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = TcpProxy("127.0.0.1", 5432)
    port = proxy.start()
    app = oncely.App(postgres_url.replace("@127.0.0.1:5432/", f"@127.0.0.1:{port}/"))
    try:
        assert app.history() == []
        proxy.cut()
        with (
            caplog.at_level(logging.INFO, logger="psycopg.pool"),
            pytest.raises(oncely.StoreUnavailable),
        ):
            app.history()
    finally:
        proxy.close()
        app.close()
    pool_warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("psycopg") and r.levelno >= logging.WARNING
    ]
    assert pool_warnings == []
