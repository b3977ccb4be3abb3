"""PostgreSQL change notices, received on a connection and a thread of their own."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from oncely.store.interface import Watch

log = logging.getLogger("oncely")


class Listener(Watch):
    """A `Watch` on PostgreSQL: a daemon thread blocked in ``notifies()`` on its own connection.

    ``connection`` is autocommit and already LISTENing, so no notice committed after the listener
    exists is missed. The listener owns it and closes it when it ends.
    """

    def __init__(self, connection: psycopg.Connection[Any], on_change: Callable[[], None]) -> None:
        self._connection = connection
        self._on_change = on_change
        self._lock = threading.Lock()
        self._closing = False
        self._alive = True
        self._thread = threading.Thread(target=self._listen, name="oncely-watch", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._alive

    def close(self) -> None:
        with self._lock:
            self._closing = True
            if not self._connection.closed:
                # Closing the connection from this thread would free libpq's state under the
                # listening thread. Shutting the socket down wakes its wait instead; it then
                # closes the connection itself.
                try:
                    with socket.socket(fileno=os.dup(self._connection.fileno())) as sock:
                        sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already gone: the listening thread is ending on its own
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=1.0)

    def _listen(self) -> None:
        failure: BaseException | None = None
        try:
            for _notice in self._connection.notifies():
                self._call()
        except Exception as exc:  # whatever broke the connection ends the watch, loudly
            failure = exc
        finally:
            with self._lock:
                closing = self._closing
                self._alive = False
                self._connection.close()
        if failure is not None and not closing:
            reason = str(failure).strip().splitlines()[0] if str(failure).strip() else "no reason"
            log.warning(
                "oncely: the PostgreSQL change watch lost its connection (%s: %s); notices may "
                "have been missed, so workers look for due work now",
                type(failure).__name__,
                reason,
            )
            self._call()

    def _call(self) -> None:
        try:
            self._on_change()
        except Exception:
            log.exception("oncely: the change watch's on_change raised; the watch goes on")
