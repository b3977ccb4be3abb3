"""SQLite: a store used from many short-lived threads keeps no connection of a thread that ended.

Each thread has its own connection, with a 64 MiB page cache. Kept until the store closed, the
connections of threads that had ended (a server that starts a thread per request, a fuzz test
running each call on a thread of its own) grew the process by gigabytes a minute.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from oncely.store import SqliteStore


def test_the_connections_of_ended_threads_are_closed(sqlite_url: str) -> None:
    store = SqliteStore(sqlite_url.removeprefix("sqlite:///"))
    store.migrate(datetime(2026, 1, 1, tzinfo=UTC))
    for _ in range(50):
        worker = threading.Thread(target=store.schema_version)
        worker.start()
        worker.join()
    store.schema_version()  # this thread opens one, closing the ended threads' ones
    opened = store._opened
    assert len(opened) <= 2, len(opened)  # this thread's, and at most the last one's
    assert threading.current_thread() in [thread for thread, _ in opened]
    store.close()
