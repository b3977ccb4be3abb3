"""A `Worker` on a thread of the test process, always stopped and joined at the end."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import oncely
from oncely.worker import Worker


@contextmanager
def serving(app: oncely.App, **options: Any) -> Iterator[Worker]:
    worker = Worker(app, **options)
    thread = threading.Thread(target=worker.run, name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(timeout=60)
        assert not thread.is_alive(), "the worker did not stop within 60 s"


def eventually(predicate: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        time.sleep(0.02)
