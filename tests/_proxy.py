"""A TCP proxy on loopback whose connections a test can cut, and then restore: an outage of the
server behind it (a restart, a network cut) without touching the server.

``cut()`` closes every connection through the proxy, both sides, and from then on accepts new
ones only to close them at once (the port stays bound, so the store's URL stays valid);
``restore()`` lets connections through again. Threads and blocking sockets: one thread accepts,
two pump each connection (one per direction).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``upstream_host:upstream_port``."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._lock = threading.Lock()
        self._cut = False
        self._refusing = False
        self._closed = False
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    def start(self) -> int:
        """Start accepting; return the port to connect to."""
        listener = socket.create_server(("127.0.0.1", 0))
        self._listener = listener
        self._acceptor = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)
        self._acceptor.start()
        port: int = listener.getsockname()[1]
        return port

    def cut(self) -> None:
        """Close every connection through the proxy and refuse new ones until `restore`."""
        with self._lock:
            self._cut = True
            doomed, self._sockets = self._sockets, set()
        for sock in doomed:
            _hang_up(sock)

    def refuse_new(self) -> None:
        """Refuse new connections until `restore`, keeping those already through: a server at
        its connection limit, to every client but the ones it already serves."""
        with self._lock:
            self._refusing = True

    def restore(self) -> None:
        """Let new connections through again."""
        with self._lock:
            self._cut = False
            self._refusing = False

    def close(self) -> None:
        """Cut everything and stop listening."""
        self.cut()
        with self._lock:
            self._closed = True
        if self._listener is not None:
            _hang_up(self._listener)
        if self._acceptor is not None:
            self._acceptor.join(timeout=5)

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                refuse = self._cut or self._refusing or self._closed
            if refuse:
                _hang_up(client)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _hang_up(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._cut or self._closed:
                    refuse = True
                else:
                    self._sockets.update((client, upstream))
            if refuse:
                _hang_up(client)
                _hang_up(upstream)
                continue
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(source, target), name="proxy-pump", daemon=True
                ).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass  # cut, or the other side went away
        with self._lock:
            self._sockets.discard(source)
            self._sockets.discard(target)
        _hang_up(source)
        _hang_up(target)


@contextlib.contextmanager
def proxied(url: str) -> Iterator[tuple[TcpProxy, str]]:
    """A proxy in front of the server of ``url`` (PostgreSQL or Redis), and the same URL through
    the proxy."""
    parts = urlsplit(url)
    port = parts.port or (6379 if parts.scheme.startswith("redis") else 5432)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", port)
    through = proxy.start()
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{through}" if userinfo else f"127.0.0.1:{through}"
    try:
        yield proxy, urlunsplit(parts._replace(netloc=netloc))
    finally:
        proxy.close()


def _hang_up(sock: socket.socket) -> None:
    """Shut ``sock`` down (waking a thread blocked on it) and close it; never raises."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
