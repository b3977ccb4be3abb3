"""gunicorn: hooks that start oncely's loop in each worker process and drain it when it exits.

In ``gunicorn.conf.py``::

    from oncely.integrations import gunicorn as oncely_hooks

    post_fork = oncely_hooks.post_fork("myservice.jobs:app")
    worker_exit = oncely_hooks.worker_exit("myservice.jobs:app")

Right for WSGI apps (Flask, Django, plain WSGI), with or without ``--preload``: ``post_fork``
runs in each worker after the fork, so no loop, thread or connection is shared with the master.
An ``"MODULE:ATTRIBUTE"`` is imported in the worker, on the hook's first call; an `oncely.App`
may be passed instead. (gunicorn's uvicorn workers run the ASGI lifespan, where
`oncely.integrations.starlette` starts the loop; both together still start one.)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from oncely.app import App
from oncely.integrations._loading import resolve

# gunicorn kills a worker still running graceful_timeout seconds after asking it to stop; the
# drain ends this long before that, so that what it booked is not lost with the process.
_BEFORE_KILL_S = 2.0

Hook = Callable[[Any, Any], None]


def post_fork(
    app: App | str,
    *,
    concurrency: int = 8,
    http: str | None = None,
    retention: timedelta | str = timedelta(days=30),
) -> Hook:
    """A ``post_fork(server, worker)`` hook: ``app.start(...)`` in the new worker process.

    The options are `oncely.App.start`'s. Every worker gets the same ``http``: give it a range
    of ports, one or more per worker (``"127.0.0.1:9464-9471"``), so that each listens on one.
    """

    def start(server: Any, worker: Any) -> None:
        resolve(app).start(concurrency=concurrency, http=http, retention=retention)

    return start


def worker_exit(app: App | str, *, timeout: float | None = None) -> Hook:
    """A ``worker_exit(server, worker)`` hook: ``app.stop(timeout)`` as the worker exits.

    ``timeout`` None: 30 s, or less so as to end 2 s before gunicorn's ``graceful_timeout``.
    """

    def stop(server: Any, worker: Any) -> None:
        chosen = timeout
        if chosen is None:
            graceful = float(getattr(worker.cfg, "graceful_timeout", 30))
            chosen = max(min(30.0, graceful - _BEFORE_KILL_S), 0.0)
        resolve(app).stop(chosen)

    return stop
