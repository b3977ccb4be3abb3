"""The store contract suite runs once per dialect, on a migrated database."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from oncely.store import Store, open_store


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    if request.param == "sqlite":
        opened = open_store(request.getfixturevalue("sqlite_url"))
        opened.migrate(datetime(2026, 1, 1, tzinfo=UTC))
    else:
        opened = open_store(request.getfixturevalue("postgres_url"))  # from a migrated template
    yield opened
    opened.close()
