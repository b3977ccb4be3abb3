"""Live pages: on PostgreSQL the store's change notices (LISTEN/NOTIFY) pushed to each open page
as server-sent events; on SQLite, which has no notices, pages poll instead."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

from oncely.store import Store, Watch


class Changes:
    """One `Store.watch` shared by every open event stream, started with the first stream."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._watch: Watch | None = None
        self._tried = False
        self._streams: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self.version = 0

    def pushed(self) -> bool:
        """Whether changes are pushed (PostgreSQL); False: pages poll (SQLite)."""
        return self._store.dialect == "postgres"

    def touch(self) -> None:
        """Tell every open stream something changed: an action this process took, which the
        store notices only when it makes something due sooner (not a pause) or books an
        outcome."""
        self._on_change()

    def _on_change(self) -> None:  # on the watch's thread
        with self._lock:
            self.version += 1
            streams = list(self._streams)
        for loop, event in streams:
            loop.call_soon_threadsafe(event.set)

    def _ensure_watch(self) -> None:
        with self._lock:
            if self._watch is not None and self._watch.alive:
                return
            self._watch = self._store.watch(self._on_change, outcomes=True)

    async def stream(self) -> AsyncIterator[str]:
        """Server-sent events: ``change`` with a counter each time the store says something
        changed. It waits on the notices, never on a timer: Starlette ends the stream when the
        page goes (it listens for the disconnect), and a page whose stream a proxy closed as
        idle reconnects on its own (``retry``) and meanwhile refreshes on its slow fallback."""
        await asyncio.to_thread(self._ensure_watch)
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            self._streams.add(entry)
        try:
            yield "retry: 3000\n\n"
            while True:
                await event.wait()
                event.clear()
                yield f"event: change\ndata: {self.version}\n\n"
        finally:
            with self._lock:
                self._streams.discard(entry)

    def close(self) -> None:
        with self._lock:
            watch, self._watch = self._watch, None
        if watch is not None:
            watch.close()
