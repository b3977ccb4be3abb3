"""The dashboard mounted under a prefix inside another ASGI application, served by uvicorn:
FastAPI's ``mount`` in this process, and a Django ASGI entry point (in a process of its own:
Django's settings are configured once per process). Requests go through the host application;
the host's own routes still answer, and every link the dashboard writes keeps the prefix."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from _web_support import build, free_port, served

import oncely
from oncely.web import dashboard

HERE = Path(__file__).parent

_DJANGO_SITE = """
import django
from django.conf import settings

settings.configure(
    ALLOWED_HOSTS=["127.0.0.1"], ROOT_URLCONF=__name__, SECRET_KEY="mount test", MIDDLEWARE=[]
)
django.setup()

from django.core.asgi import get_asgi_application
from django.http import HttpResponse
from django.urls import path

from _web_support import build
from oncely.web import dashboard

urlpatterns = [path("hello/", lambda request: HttpResponse("hello from django"))]
site = get_asgi_application()
app, clock = build({url!r})
oncely_dashboard = dashboard(app)


async def application(scope, receive, send):
    # Django's handler takes HTTP only: the dashboard gets the lifespan and its own prefix.
    if scope["type"] == "lifespan":
        return await oncely_dashboard(scope, receive, send)
    if scope["path"] == "/oncely" or scope["path"].startswith("/oncely/"):
        scoped = dict(scope, root_path=scope.get("root_path", "") + "/oncely")
        return await oncely_dashboard(scoped, receive, send)
    return await site(scope, receive, send)
"""


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def check_mounted(base: str, host_path: str, host_says: str) -> None:
    """What both mounts must do: the host answers its own path, the dashboard its pages, API
    and assets under /oncely, with links that keep the prefix."""
    assert get(base + host_path) == (200, host_says)
    status, overview = get(base + "/oncely/")
    assert status == 200, overview
    assert 'href="/oncely/schedules/beat"' in overview
    assert 'src="/oncely/static/' in overview
    assert 'href="/schedules/' not in overview
    status, page = get(base + "/oncely/schedules/beat")
    assert status == 200, page
    assert "every 5 minutes" in page
    status, twin = get(base + "/oncely/api/schedules/beat")
    assert (status, json.loads(twin)["key"]) == (200, "beat")
    asset = overview.split('src="/oncely/static/', 1)[1].split('"', 1)[0]
    assert get(f"{base}/oncely/static/{asset}")[0] == 200
    assert get(base + "/schedules/beat")[0] == 404  # unmounted, the host's: not the dashboard


@pytest.fixture
def app(sqlite_url: str) -> Iterator[oncely.App]:
    made, _ = build(sqlite_url)
    yield made
    made.close()


def test_mounted_in_fastapi(app: oncely.App) -> None:
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse

    api = FastAPI()

    @api.get("/hello", response_class=PlainTextResponse)
    def hello() -> str:
        return "hello from fastapi"

    api.mount("/oncely", dashboard(app))
    with served(api) as base:
        check_mounted(base, "/hello", "hello from fastapi")


def test_mounted_in_a_django_asgi_application(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "django_site.py").write_text(_DJANGO_SITE.format(url=sqlite_url))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "django_site:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning"],
        cwd=tmp_path, env={"PYTHONPATH": f"{tmp_path}:{HERE}", "PATH": ""},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                get(base + "/hello/")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("the Django site did not start") from None
                time.sleep(0.1)
        check_mounted(base, "/hello/", "hello from django")
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    assert "Exception in ASGI application" not in output, output
