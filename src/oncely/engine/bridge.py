"""The one bridge from the synchronous engine to async handlers: an event loop of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any


class AsyncBridge:
    """Runs coroutines to completion on one event loop, on a thread the engine owns.

    A loop of its own works whether or not the caller already runs one (``app.tick()`` called
    from async code would otherwise fail with "asyncio.run() cannot be called from a running
    event loop"), and handlers keep one loop across calls for their clients and pools.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, awaitable: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(_wrap(awaitable), self._started()).result()

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="oncely-async-handlers", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


async def _wrap(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
