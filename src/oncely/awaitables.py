"""The ``_async`` twins of the scheduling and query API, for asyncio apps (FastAPI, Starlette).

Each twin awaits the one synchronous call, run on a small pool of threads of its own, so that no
oncely call blocks the event loop and a fix to the call lands once (STYLE.md: the core is one
colour). The pool is bounded (`THREADS`): a burst of awaited calls queues for a thread rather
than opening a connection each. A twin cancelled while its call runs leaves the call to finish:
it is one transaction, written whole or not at all, never stopped half-way.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")

#: Threads running awaited calls at once, in this process; as many as the PostgreSQL store's
#: pooled connections by default, so a thread never waits for a connection.
THREADS = 8

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_lock = threading.Lock()


def _threads() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            # A forked child has none of its parent's threads: it starts a pool of its own.
            _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="oncely-async")
            _pool_pid = os.getpid()
        return _pool


async def in_thread(func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Await ``func(*args, **kwargs)`` run on oncely's thread pool, with the caller's context
    variables."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await loop.run_in_executor(_threads(), call)


def twin(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """The awaitable twin of ``method``, named ``<method>_async``."""

    async def awaitable(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await in_thread(method, self, *args, **kwargs)

    awaitable.__name__ = f"{method.__name__}_async"
    awaitable.__qualname__ = f"{method.__qualname__}_async"
    awaitable.__doc__ = (
        f"`{method.__name__}`, awaited: the call runs on oncely's thread pool and the event "
        "loop goes on meanwhile. Takes, returns and raises what it does."
    )
    return awaitable
