"""While PostgreSQL cannot be reached, the outage is reported once, by oncely (DESIGN lesson 10):
psycopg's pool does not add a warning per failed connection attempt of oncely's pool."""

from __future__ import annotations

import logging

import pytest

import oncely
from _proxy import proxied


def test_the_pool_does_not_log_each_failed_connection_of_oncelys_pool(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with proxied(postgres_url) as (proxy, through):
        app = oncely.App(through)
        try:
            assert app.history() == []
            proxy.cut()
            with (
                caplog.at_level(logging.INFO, logger="psycopg.pool"),
                pytest.raises(oncely.StoreUnavailable),
            ):
                app.history()
        finally:
            app.close()
    pool_warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("psycopg") and r.levelno >= logging.WARNING
    ]
    assert pool_warnings == []
