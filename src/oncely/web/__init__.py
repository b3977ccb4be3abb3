"""The dashboard: every schedule and occurrence in a browser, and actions with a grant.

::

    from oncely.web import dashboard

    asgi = dashboard(app)                                    # read-only, this machine only
    asgi = dashboard(app, auth=who_is, grants={"pause", "resume"})

Mount it in FastAPI or Starlette (``api.mount("/oncely", asgi)``) or any ASGI server, or run
``oncely web MODULE:APP``. Needs the extra ``oncely[web]`` (Starlette and Jinja2); the core never
imports this package.
"""

from __future__ import annotations

from oncely.app import App
from oncely.web.access import ACTIONS, Auth, Grants, is_loopback
from oncely.web.routes import Pages


def dashboard(
    app: App, *, auth: Auth | None = None, grants: Grants = (), secret: bytes | None = None
) -> Pages:
    """The dashboard of ``app``, an ASGI application.

    Without ``auth`` it is read-only and answers requests from this machine only. ``auth`` is a
    function of the Starlette request returning the person's name (None: not signed in, 401);
    ``grants`` names the actions (`ACTIONS`) everyone it names may take, or is a function from a
    name to that person's actions. Every action is a POST from the dashboard's own pages
    (checked by ``Sec-Fetch-Site`` and a token bound to the person, made with ``secret``, by
    default random per process: give one when several processes serve the dashboard), and is
    recorded in the schedule's history with who took it and why.

    Raises `oncely.errors.ConfigurationError` for grants without ``auth`` or an unknown action.
    """
    from oncely.web.access import Access

    return Pages(app, Access(auth, grants, secret))


__all__ = ["ACTIONS", "Auth", "Grants", "Pages", "dashboard", "is_loopback"]
