"""The engine suite: `App` on a real store, once per dialect, with a clock the test moves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _engine_support import START, MakeApp

import oncely
from oncely.testing import Clock


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    value: str = request.getfixturevalue(name)
    return value


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


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


@pytest.fixture
def remind(app: oncely.App) -> oncely.Job:
    """A job of ``app`` scheduled at run time, whose handler does nothing."""

    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    return remind
