"""The lock suite: one `app.lock` contract over every provider, each on a real server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _lock_support import Provided


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def provided(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Provided]:
    if request.param == "redis":
        yield Provided(
            "redis", request.getfixturevalue("sqlite_url"), request.getfixturevalue("redis_url")
        )
        return
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    yield Provided(request.param, request.getfixturevalue(name), None)
