"""The engine suite: `App` on a real store, once per dialect, with a clock the test moves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

import oncely

START = datetime(2026, 11, 30, 8, 59, 30, tzinfo=UTC)


class Clock:
    """The one clock of the apps under test: time moves only when the test says so."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, now: datetime) -> datetime:
        self.now = now
        return now


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    value: str = request.getfixturevalue(name)
    return value


@pytest.fixture
def clock() -> Clock:
    return Clock()


MakeApp = Callable[[], oncely.App]


@pytest.fixture
def make_app(url: str, clock: Clock) -> Iterator[MakeApp]:
    """Apps on the test's database sharing its clock (as instances of one service would)."""
    apps: list[oncely.App] = []

    def make() -> oncely.App:
        app = oncely.App(url, clock=clock)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()


@pytest.fixture
def app(make_app: MakeApp) -> oncely.App:
    return make_app()
