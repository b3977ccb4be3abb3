"""What the dashboard tests share: a seeded app on a fixed clock, the dashboard served by a real
uvicorn on a loopback port, and a plain ASGI call for the checks that need no browser."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import uvicorn

import oncely
from oncely.model import Claim
from oncely.web import ACTIONS, dashboard

START = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # a Friday, two days before Berlin's DST change
EVIL = "<script>alert('key')</script>"
EVIL_PAYLOAD = {"note": "<img src=x onerror=alert('payload')>"}
EVIL_ERROR = "upstream answered 503 <script>alert('error')</script>"


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def build(url: str) -> tuple[oncely.App, Clock]:
    """An app with a beat every 5 minutes, a failing sync every 10, a weekday digest, a nightly
    report in Berlin at 02:30 (skipped by Sunday's DST gap), per-user reminders in tenant acme,
    and one schedule whose key, payload and error carry markup."""
    clock = Clock()
    app = oncely.App(url, clock=clock)

    @app.job(oncely.cron("0 9 * * MON-FRI", tz="Europe/Berlin"))
    def digest(run: oncely.Run) -> None:
        pass

    @app.job(oncely.every(minutes=10), retries=1)
    def sync(run: oncely.Run) -> None:
        raise RuntimeError("upstream answered 503")

    @app.job(oncely.every(minutes=5))
    def beat(run: oncely.Run) -> None:
        pass

    @app.job(retries=1)
    def remind(run: oncely.Run) -> None:
        if run.payload and "note" in run.payload:
            raise RuntimeError(EVIL_ERROR)

    @app.job()
    def export(run: oncely.Run) -> None:
        pass

    app.tick()
    app.schedule(remind, oncely.cron("30 2 * * *", tz="Europe/Berlin"), key="nightly")
    for user in range(1, 6):
        app.for_tenant("acme").schedule(
            remind, oncely.every(hours=user), key=f"remind:user{user}", payload={"user": user}
        )
    app.schedule(remind, oncely.every(minutes=15), key=EVIL, payload=EVIL_PAYLOAD)
    for _ in range(6):
        clock.now += timedelta(minutes=5)
        app.tick()
    return app, clock


def claim(app: oncely.App, key: str, owner: str) -> Claim:
    """Trigger schedule ``key`` (of the job of that name) now and claim it as worker ``owner``."""
    app.trigger(key)
    (claimed,) = app.store.claim_due(
        owner=owner, lease=timedelta(minutes=5), limit=1, now=app.now(),
        jobs=[key], reclaim=[key], serial=[],
    )  # fmt: skip
    return claimed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def served(asgi: Any) -> Iterator[str]:
    """Serve ``asgi`` with uvicorn on a loopback port, on a thread; yield its base URL."""
    port = free_port()
    config = uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def who_is(request: Any) -> str | None:
    """The auth hook of the tests: the person is the ``who`` cookie."""
    name = request.cookies.get("who")
    return name or None


def grants_of(name: str) -> set[str]:
    return set(ACTIONS) if name == "ada" else set()


def granted_dashboard(app: oncely.App) -> Any:
    return dashboard(app, auth=who_is, grants=grants_of, secret=b"test secret")


def ada(token: str, **more: str) -> dict[str, str]:
    """The headers of a same-origin request by ada, who is granted every action."""
    return {"cookie": "who=ada", "sec-fetch-site": "same-origin", **more}


def token_of(asgi: object, who: str = "ada") -> str:
    """The form token the dashboard gives ``who`` on a page."""
    page = call(asgi, "GET", "/schedules/beat", headers={"cookie": f"who={who}"})
    marker = 'name="csrf" value="'
    return page.body.split(marker, 1)[1].split('"', 1)[0]


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: str = ""
    chunks: list[bytes] = field(default_factory=list)


def call(
    asgi: Any,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    client: str = "127.0.0.1",
    query: str = "",
) -> Answer:
    """One request straight to the ASGI app, as a server would make it."""
    body = urlencode(form or {}).encode()
    sent = {"content-type": "application/x-www-form-urlencoded", **(headers or {})}
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in sent.items()]
        + [(b"host", b"127.0.0.1:8400")],
        "client": (client, 50000),
        "server": ("127.0.0.1", 8400),
    }
    answer = Answer(0, {})
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            answer.chunks.append(message.get("body", b""))

    asyncio.run(asgi(scope, receive, send))
    answer.body = b"".join(answer.chunks).decode()
    return answer
