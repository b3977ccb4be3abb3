"""The dashboard's routes: each page, its ``/api`` twin, the event stream and the actions.

Keys may hold any character, "/" included, so a schedule's routes are read from the raw path:
each segment is percent-decoded on its own, and ``/schedules/eu%2Finvoice`` is key
``eu/invoice``. The tenant of a schedule is the query parameter ``tenant`` (none: no tenant).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import quote, unquote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse

from oncely.app import App
from oncely.engine import json_value, trigger_text
from oncely.errors import InvalidSchedule, OncelyError, UnknownSchedule
from oncely.web import views
from oncely.web.access import ACTIONS, Access, Visitor, cross_site, is_loopback, token_matches
from oncely.web.actions import perform
from oncely.web.live import Changes

_STATIC = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}
_PAGES = {"": "overview", "workers": "workers", "locks": "locks", "drift": "drift"}


class Pages:
    """Renders documents as pages (``templates/``) or JSON, for one app and one `Access`."""

    def __init__(self, app: App, access: Access) -> None:
        self.app = app
        self.access = access
        self.changes = Changes(app.store)
        self.templates = Environment(
            loader=PackageLoader("oncely.web", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters["when"] = _when
        self.templates.filters["q"] = lambda text: quote(str(text), safe="")
        self.templates.globals["trigger_text"] = trigger_text

    # --- the ASGI entry ---------------------------------------------------------------------

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, self.changes)
            return
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        response = await self.respond(request)
        await response(scope, receive, send)

    async def respond(self, request: Request) -> Response:
        if self.access.auth is None and not _from_loopback(request):
            return _text(403, "this dashboard has no auth hook, so it answers this machine only")
        try:
            visitor = self.access.visitor(request)
        except OncelyError as exc:
            return _text(500, str(exc))
        if visitor is None:
            return _text(401, "sign in to see this dashboard")
        segments = _segments(request)
        try:
            if request.method == "POST":
                return await self.post(request, visitor, segments)
            if request.method not in ("GET", "HEAD"):
                return _text(405, "the dashboard answers GET, and POST for actions")
            return await run_in_threadpool(self.get, request, visitor, segments)
        except UnknownSchedule as exc:
            return self.message(request, visitor, 404, str(exc))
        except InvalidSchedule as exc:
            return self.message(request, visitor, 400, str(exc))

    # --- reading ----------------------------------------------------------------------------

    def get(self, request: Request, visitor: Visitor, segments: list[str]) -> Response:
        api = segments[:1] == ["api"]
        parts = segments[1:] if api else segments
        if parts[:1] == ["static"] and len(parts) == 2 and parts[1] in _STATIC and not api:
            text = resources.files("oncely.web").joinpath("static", parts[1]).read_text("utf-8")
            return Response(text, media_type=_STATIC[parts[1]])
        if parts == ["events"] and not api:
            return self.events(request)
        found = self.document(request, parts)
        if found is None:
            return self.message(request, visitor, 404, "no such page")
        template, document = found
        if api:
            return _json(document)
        return self.page(request, visitor, template, document)

    def document(self, request: Request, parts: list[str]) -> tuple[str, Any] | None:
        query = request.query_params
        tenant = query.get("tenant") or None
        joined = "/".join(parts)
        if joined in _PAGES:
            name = _PAGES[joined]
            return name, getattr(views, name)(self.app)
        if parts == ["schedules"]:
            after_key = query.get("after")
            after = None if after_key is None else (query.get("after_tenant") or None, after_key)
            return "schedules", views.schedules(
                self.app,
                job=query.get("job") or None,
                state=query.get("state") or None,
                tenant=tenant,
                prefix=query.get("prefix") or None,
                after=after,
                limit=_int(query.get("limit"), 50),
            )
        if len(parts) == 2 and parts[0] == "schedules":
            return "schedule", views.schedule(self.app, tenant, parts[1])
        if len(parts) == 4 and parts[0] == "schedules" and parts[2] == "occurrences":
            return "occurrence", views.occurrence(self.app, tenant, parts[1], _time(parts[3]))
        return None

    def events(self, request: Request) -> Response:
        if not self.changes.pushed():
            return _text(404, "this store has no change notices; pages poll instead")
        return StreamingResponse(
            self.changes.stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    # --- acting -----------------------------------------------------------------------------

    async def post(self, request: Request, visitor: Visitor, segments: list[str]) -> Response:
        refused = cross_site(request)
        if refused is not None:
            return _text(403, f"refused: a cross-site request ({refused})")
        target, action = _target(segments)
        if action not in ACTIONS or target is None:
            return _text(404, "no such action")
        if not visitor.may(action):
            return _text(403, f"refused: {visitor.name} is not granted {action!r}")
        form = await request.form()
        fields = {name: str(value) for name, value in form.items()}
        if not token_matches(visitor, fields.get("csrf") or request.headers.get("x-oncely-token")):
            return _text(403, "refused: the form's token is missing or not yours; reload the page")
        tenant = request.query_params.get("tenant") or None
        outcome = await run_in_threadpool(
            perform, self.app, visitor.name, action, target, tenant, fields
        )
        if outcome.preview is not None:
            return self.page(request, visitor, "backfill", outcome.preview)
        if outcome.status != 200:
            return self.message(request, visitor, outcome.status, outcome.message)
        self.changes.touch()
        where = outcome.back or "/"
        query = urlencode({"tenant": tenant} if tenant else {})
        location = f"{request.scope.get('root_path', '')}{where}{'?' + query if query else ''}"
        return Response(status_code=303, headers={"Location": location})

    # --- rendering --------------------------------------------------------------------------

    def page(self, request: Request, visitor: Visitor, template: str, document: Any) -> Response:
        partial = request.headers.get("x-oncely-partial") == "1"
        html = self.templates.get_template(f"{template}.html").render(
            layout="partial.html" if partial else "base.html",
            d=document,
            visitor=visitor,
            base=request.scope.get("root_path", ""),
            tenant=request.query_params.get("tenant") or None,
            query=dict(request.query_params),
            live="sse" if self.changes.pushed() else "poll",
            now=self.app.now(),
            page=template,
        )
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    def message(self, request: Request, visitor: Visitor, status: int, text: str) -> Response:
        if _segments(request)[:1] == ["api"]:
            return _json({"error": text}, status)
        response = self.page(request, visitor, "message", {"status": status, "message": text})
        response.status_code = status
        return response


def _segments(request: Request) -> list[str]:
    raw = request.scope.get("raw_path") or request.scope["path"].encode()
    path = raw.decode("latin-1").split("?", 1)[0]
    root = request.scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return [unquote(part) for part in path.strip("/").split("/") if part != ""]


def _target(segments: list[str]) -> tuple[str | None, str | None]:
    """(key or lock name, action) of a POST path: ``schedules/KEY/ACTION``,
    ``locks/NAME/release``."""
    if len(segments) == 3 and segments[0] in ("schedules", "locks"):
        if segments[0] == "locks" and segments[2] != "release":
            return None, None
        if segments[0] == "schedules" and segments[2] == "release":
            return None, None
        return segments[1], segments[2]
    return None, None


def _from_loopback(request: Request) -> bool:
    client = request.client
    return client is None or is_loopback(client.host)


def _time(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidSchedule(f"{text!r} is not an ISO 8601 time") from exc
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _int(text: str | None, default: int) -> int:
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError as exc:
        raise InvalidSchedule(f"{text!r} is not a whole number") from exc


def _when(value: datetime | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _json(document: Any, status: int = 200) -> Response:
    body = json.dumps(document, default=json_value, ensure_ascii=False)
    return Response(body, status_code=status, media_type="application/json")


def _text(status: int, text: str) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain; charset=utf-8")


async def _lifespan(
    receive: Callable[..., Any], send: Callable[..., Any], changes: Changes
) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            changes.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
