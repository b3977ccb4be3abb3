"""HttpServer: real HTTP round trips on a free port for /healthz, /metrics and everything else."""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from _worker_support import FakeClock

from _processes import free_ports
from oncely.errors import ConfigurationError
from oncely.worker.health import Health
from oncely.worker.metrics import Metrics
from oncely.worker.server import HttpServer, parse_address

# No proxy from the environment may stand between the test and 127.0.0.1.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get(server: HttpServer, path: str) -> tuple[int, str, bytes]:
    """Status, Content-Type and body of GET ``path``, whatever the status."""
    url = f"http://127.0.0.1:{server.port}{path}"
    try:
        with _OPENER.open(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["Content-Type"], error.read()


@pytest.fixture
def health() -> Health:
    return Health(60.0, clock=FakeClock())


@pytest.fixture
def server(health: Health) -> Iterator[HttpServer]:
    metrics = Metrics()
    metrics.outcome("digest", "succeeded")
    with HttpServer("127.0.0.1:0", health, metrics) as server:
        yield server


def test_port_0_listens_on_a_free_port(server: HttpServer) -> None:
    assert server.port > 0


def test_healthz_is_503_before_the_first_tick_and_200_after(
    server: HttpServer, health: Health
) -> None:
    code, content_type, body = get(server, "/healthz")
    assert (code, content_type) == (503, "application/json")
    assert json.loads(body) == {"status": "failing", "reason": "no tick has succeeded yet"}

    health.tick_succeeded()
    code, content_type, body = get(server, "/healthz?probe=liveness")
    assert (code, content_type) == (200, "application/json")
    assert json.loads(body) == {"status": "ok", "last_tick_age_s": 0.0}

    health.tick_failed("StoreUnavailable: connection refused")
    code, _, body = get(server, "/healthz")
    assert code == 503
    assert json.loads(body)["reason"] == "last tick failed: StoreUnavailable: connection refused"


def test_metrics_serves_the_exposition_format(server: HttpServer) -> None:
    code, content_type, body = get(server, "/metrics")
    assert code == 200
    assert content_type == Metrics.content_type
    assert b'oncely_occurrences_total{job="digest",status="succeeded"} 1.0\n' in body
    assert b"# TYPE oncely_in_flight gauge\n" in body


@pytest.mark.parametrize("path", ["/", "/health", "/metrics/x", "/healthz/"])
def test_other_paths_are_404(server: HttpServer, path: str) -> None:
    assert get(server, path)[0] == 404


def test_requests_are_logged_at_debug_to_oncely_http_not_to_stderr(
    server: HttpServer, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely.http")
    get(server, "/nowhere")  # send_response logs before the response goes out: no race
    assert capfd.readouterr().err == ""
    lines = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert any(
        name == "oncely.http" and level == logging.DEBUG and '"GET /nowhere HTTP/1.1" 404' in text
        for name, level, text in lines
    ), lines


def test_close_is_prompt_and_frees_the_port(health: Health) -> None:
    server = HttpServer("127.0.0.1:0", health, Metrics())
    server.start()
    port = server.port
    assert get(server, "/healthz")[0] == 503
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 1.0
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass
    server.close()  # a second close is harmless

    with HttpServer(f"127.0.0.1:{port}", health, Metrics()) as again:
        assert again.port == port
        assert get(again, "/healthz")[0] == 503


def test_an_address_in_use_is_a_configuration_error(server: HttpServer, health: Health) -> None:
    with pytest.raises(ConfigurationError, match=f"cannot listen on '127.0.0.1:{server.port}'"):
        HttpServer(f"127.0.0.1:{server.port}", health, Metrics()).start()


def test_close_before_start_does_nothing(health: Health) -> None:
    HttpServer("127.0.0.1:0", health, Metrics()).close()


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:9100", ("127.0.0.1", range(9100, 9101))),
        ("localhost:0", ("localhost", range(0, 1))),
        (":9100", ("", range(9100, 9101))),
        ("[::1]:9100", ("::1", range(9100, 9101))),
        (" 0.0.0.0:65535 ", ("0.0.0.0", range(65535, 65536))),
        ("127.0.0.1:9464-9471", ("127.0.0.1", range(9464, 9472))),
        ("[::1]:9464-9464", ("::1", range(9464, 9465))),
    ],
)
def test_parse_address(address: str, expected: tuple[str, range]) -> None:
    assert parse_address(address) == expected


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("127.0.0.1", "has no port"),
        ("", "has no port"),
        ("127.0.0.1:", "the port must be a number from 0 to 65535"),
        ("127.0.0.1:http", "the port must be a number from 0 to 65535"),
        ("127.0.0.1:65536", "the port must be a number from 0 to 65535"),
        ("127.0.0.1:-1", "the port must be a number from 0 to 65535"),
        ("127.0.0.1:٣", "the port must be a number from 0 to 65535"),
        ("::1:9100", "IPv6 host in brackets"),
        ("127.0.0.1:9471-9464", "a port range runs from a lower port to a higher one"),
        ("127.0.0.1:0-9464", "a port range runs from a lower port to a higher one, neither"),
        ("127.0.0.1:9464-", "or a range FIRST-LAST, not ''"),
        ("127.0.0.1:9464-x", "or a range FIRST-LAST, not 'x'"),
        ("127.0.0.1:9464-70000", "or a range FIRST-LAST, not '70000'"),
    ],
)
def test_a_bad_address_is_a_configuration_error(address: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        HttpServer(address, Health(60.0), Metrics())


def test_300_idle_connections_are_capped_timed_out_and_healthz_answers(health: Health) -> None:
    """Idle clients cost a thread each until they hung up: 4,000 made 3,962 threads, and 196
    idle sockets under a 200-descriptor limit made /healthz time out."""
    import threading

    from oncely.worker import server as module

    with HttpServer("127.0.0.1:0", health, Metrics()) as server:
        before = threading.active_count()
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(300)]
        try:
            time.sleep(0.5)
            # A bound of its own, not MAX_CLIENTS: raised to 100,000, that one passed with a
            # thread for each of the 300.
            assert threading.active_count() - before <= 64
            began = time.monotonic()
            while True:  # the capped slots free up when their idle clients time out
                try:
                    status, _, _ = get(server, "/healthz")
                    break
                except OSError:
                    assert time.monotonic() - began < module.CLIENT_TIMEOUT_S + 3
                    time.sleep(0.1)
            assert status == health.status()[0]
            for sock in idle:  # every idle one was hung up on: refused, or timed out
                sock.settimeout(module.CLIENT_TIMEOUT_S + 3)
                assert sock.recv(1) == b""
        finally:
            for sock in idle:
                sock.close()


def test_servers_given_one_port_range_each_listen_on_the_next_free_port(health: Health) -> None:
    """N processes of a web server each start oncely with the same ``http``: with one port, all
    but the first failed to listen and their metrics could not be scraped."""
    ports = free_ports(2)
    address = f"127.0.0.1:{ports[0]}-{ports[-1]}"
    with (
        HttpServer(address, health, Metrics()) as first,
        HttpServer(address, health, Metrics()) as second,
    ):
        assert (first.port, second.port) == (ports[0], ports[1])
        for server in (first, second):
            code, content_type, _ = get(server, "/metrics")
            assert (code, content_type) == (200, Metrics.content_type)
        with pytest.raises(ConfigurationError) as refused:
            HttpServer(address, health, Metrics()).start()
    assert str(refused.value) == (
        f"cannot listen on {address!r}: all 2 ports of the range are in use; widen the range to "
        "one port for each process that listens on it, and more for the new processes a rolling "
        "restart starts before the old ones exit"
    )
