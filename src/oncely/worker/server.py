"""The worker's HTTP endpoint: `/healthz` and `/metrics` on a daemon thread.

stdlib `http.server` is enough for two read-only paths scraped every few seconds; it answers each
request on its own thread, so a slow client never delays the worker loop or another scrape.
"""

from __future__ import annotations

import errno
import json
import logging
import socket
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from oncely.errors import ConfigurationError
from oncely.worker.health import Health
from oncely.worker.metrics import Metrics

log = logging.getLogger("oncely.http")

# How often serve_forever looks for a shutdown request: the longest `close()` waits for it.
_POLL_INTERVAL_S = 0.1
#: Clients served at once; one more is hung up on at once. Each client had a thread until it hung
#: up: 4,000 idle connections made 3,962 threads.
MAX_CLIENTS = 32
#: Seconds a client may take to send its request, or to read the answer: idle sockets held
#: /healthz and the handlers' file descriptors (196 of a 200-descriptor limit) indefinitely.
CLIENT_TIMEOUT_S = 5.0


def parse_address(address: str) -> tuple[str, range]:
    """``"HOST:PORT"`` as ``(host, ports)``; ``[::1]:PORT`` for IPv6, ``:PORT`` for all interfaces.

    Port 0 means any free port. ``HOST:FIRST-LAST`` is a range of ports (both included), for N
    processes that each listen on one of them. Raises `ConfigurationError` naming the address
    and what is wrong with it (no port, a port that is not a number in 0-65535, a range that
    runs backwards or holds port 0, an IPv6 host without brackets).
    """
    text = address.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ConfigurationError(
            f"HTTP address {address!r} has no port; write HOST:PORT, e.g. 127.0.0.1:9100"
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ConfigurationError(
            f"HTTP address {address!r}: write an IPv6 host in brackets, e.g. [::1]:9100"
        )
    first_text, dash, last_text = port_text.partition("-")
    first, last = _port(address, first_text), _port(address, last_text if dash else first_text)
    if dash and not 0 < first <= last:
        raise ConfigurationError(
            f"HTTP address {address!r}: a port range runs from a lower port to a higher one, "
            "neither of them 0, e.g. 127.0.0.1:9464-9471"
        )
    return host, range(first, last + 1)


def _port(address: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > 65535:
        raise ConfigurationError(
            f"HTTP address {address!r}: the port must be a number from 0 to 65535 "
            f"(0 for any free port), or a range FIRST-LAST, not {text!r}"
        )
    return int(text)


class HttpServer:
    """Serves `/healthz` (`Health.status` as JSON) and `/metrics` (`Metrics.render`) on ``address``.

    Given a port range, it listens on the first port of it that no other socket listens on
    (`ports`). Nothing listens until `start()`; `close()` stops serving and frees the port, and
    is safe to call twice or before `start()`. Every other path is 404. Requests are logged to
    the ``oncely.http`` logger at DEBUG. Usable as a context manager (start on enter, close on
    exit).

    Raises `ConfigurationError` for an address `parse_address` refuses.
    """

    def __init__(self, address: str, health: Health, metrics: Metrics) -> None:
        self.address = address
        self._host, self.ports = parse_address(address)
        self._health = health
        self._metrics = metrics
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port listened on once started (the one chosen, for port 0 or a range); before,
        the first one asked."""
        if self._server is not None:
            return int(self._server.server_address[1])
        return self.ports[0]

    def start(self) -> None:
        """Listen and serve on a daemon thread; returns at once, ready for requests.

        Raises `ConfigurationError` when the address cannot be listened on (in use, not local),
        or when every port of a range is in use.
        """
        if self._server is not None:
            return
        server = self._bind()
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": _POLL_INTERVAL_S},
            name=f"oncely-http:{self.port}",
            daemon=True,
        )
        self._thread.start()

    def _bind(self) -> _Server:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        in_use: OSError | None = None
        for port in self.ports:
            try:
                return _Server((self._host, port), family, self._health, self._metrics)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise ConfigurationError(f"cannot listen on {self.address!r}: {exc}") from exc
                in_use = exc  # another process of this server has it: the next may be free
        if len(self.ports) == 1:
            raise ConfigurationError(f"cannot listen on {self.address!r}: {in_use}") from in_use
        raise ConfigurationError(
            f"cannot listen on {self.address!r}: all {len(self.ports)} ports of the range are in "
            "use; widen the range to one port for each process that listens on it, and more for "
            "the new processes a rolling restart starts before the old ones exit"
        ) from in_use

    def close(self) -> None:
        """Stop serving and close the listening socket; returns once the serving thread ended."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        thread.join()

    def __enter__(self) -> HttpServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's 5: a burst of connections beyond it waited out SYN retries of 1 s and more.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        family: socket.AddressFamily,
        health: Health,
        metrics: Metrics,
    ) -> None:
        self.address_family = family
        self.health = health
        self.metrics = metrics
        self._clients = threading.BoundedSemaphore(MAX_CLIENTS)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._clients.acquire(blocking=False):
            log.debug(
                "oncely: HTTP client %s refused: %d served already", client_address, MAX_CLIENTS
            )
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._clients.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._clients.release()

    def server_bind(self) -> None:
        # HTTPServer's own also sets server_name from socket.getfqdn(host), a reverse DNS lookup
        # that can stall start-up for seconds; the name is used for nothing here.
        socketserver.TCPServer.server_bind(self)
        self.server_name = str(self.server_address[0])
        self.server_port = int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The default prints a traceback to stderr, outside logging and its format.
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):  # a scraper that gave up: routine
            log.debug("oncely: HTTP client %s went away: %s", client_address, exc)
        else:
            log.error("oncely: HTTP request from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = CLIENT_TIMEOUT_S

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        if path == "/healthz":
            code, body = self.server.health.status()
            self._send(code, "application/json", json.dumps(body).encode())
        elif path == "/metrics":
            self._send(200, self.server.metrics.content_type, self.server.metrics.render())
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found: try /healthz or /metrics\n")

    def _send(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("oncely: HTTP %s " + format, self.address_string(), *args)
