"""The worker suite: real stores, once per dialect, and the real clock (the worker sleeps)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    value: str = request.getfixturevalue(name)
    return value
