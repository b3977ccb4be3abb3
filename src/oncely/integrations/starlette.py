"""FastAPI and Starlette: oncely's loop in every server process, from the app's lifespan.

::

    from fastapi import FastAPI
    from oncely.integrations.starlette import lifespan

    api = FastAPI(lifespan=lifespan(app))

or, beside startup work of your own::

    from contextlib import asynccontextmanager
    from oncely.integrations.starlette import running

    @asynccontextmanager
    async def lifespan(api):
        async with running(app):
            yield

Each server process (``uvicorn --workers 4``, gunicorn's uvicorn workers) runs its lifespan, so
each starts one loop; shutdown drains it on a thread, leaving the event loop free meanwhile.
Needs only anyio, which Starlette depends on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta

from oncely.app import App


@asynccontextmanager
async def running(
    app: App,
    *,
    stop_timeout: float = 30.0,
    concurrency: int = 8,
    http: str | None = None,
    retention: timedelta | str = timedelta(days=30),
) -> AsyncIterator[None]:
    """``app.start(...)`` on entry, ``app.stop(stop_timeout)`` on exit (see `oncely.App.start`).

    Under ``--workers N`` give ``http`` a range of N ports or more (``"127.0.0.1:9464-9471"``),
    so that each process listens on one.
    """
    from anyio import to_thread

    app.start(concurrency=concurrency, http=http, retention=retention)
    try:
        yield
    finally:
        await to_thread.run_sync(app.stop, stop_timeout)


def lifespan(
    app: App,
    *,
    stop_timeout: float = 30.0,
    concurrency: int = 8,
    http: str | None = None,
    retention: timedelta | str = timedelta(days=30),
) -> Callable[[object], AbstractAsyncContextManager[None]]:
    """A lifespan for ``FastAPI(lifespan=...)`` / ``Starlette(lifespan=...)`` running `running`."""

    def start_and_stop(_asgi_app: object) -> AbstractAsyncContextManager[None]:
        return running(
            app,
            stop_timeout=stop_timeout,
            concurrency=concurrency,
            http=http,
            retention=retention,
        )

    return start_and_stop
