"""Who may do what on the dashboard, and the checks every state-changing request passes.

Read-only unless an auth hook names the person and the grants give them actions. A request
that changes something is a POST from a page of the dashboard itself: its ``Sec-Fetch-Site`` is
``same-origin`` (or, from a client that sends no such header, its ``Origin`` is the dashboard's
own), and it carries the token the page was rendered with, which is bound to the person.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Callable, Collection
from dataclasses import dataclass

from starlette.requests import Request

from oncely.errors import ConfigurationError

ACTIONS = ("trigger", "pause", "resume", "backfill", "retry", "release")
"""Every action the dashboard can take, each granted by name."""

Auth = Callable[[Request], "str | None"]
"""An auth hook: the name of the person making ``request`` (recorded in history as who acted),
or None when they are not signed in (the dashboard answers 401)."""

Grants = Collection[str] | Callable[[str], Collection[str]]
"""The actions granted: the same names for everyone the auth hook names, or a function from a
person's name to theirs."""

ANONYMOUS = "anonymous"


@dataclass(frozen=True, slots=True)
class Visitor:
    """The person a request is from, what they may do, and the token their forms carry."""

    name: str
    granted: frozenset[str]
    token: str

    def may(self, action: str) -> bool:
        return action in self.granted


class Access:
    """The dashboard's auth hook and grants, checked: grants without an auth hook, or naming an
    action that does not exist, raise `ConfigurationError` when the dashboard is made."""

    def __init__(self, auth: Auth | None, grants: Grants, secret: bytes | None) -> None:
        if auth is not None and not callable(auth):
            raise ConfigurationError("auth must be a function of the request")
        if not callable(grants):
            grants = frozenset(grants)
            _check_actions(grants)
            if grants and auth is None:
                raise ConfigurationError(
                    "the dashboard grants actions only to people an auth hook names: pass "
                    "auth=, a function of the request returning the person's name"
                )
        elif auth is None:
            raise ConfigurationError("grants= as a function needs auth= to name the person")
        self.auth = auth
        self._grants = grants
        self._secret = secret or secrets.token_bytes(32)

    def visitor(self, request: Request) -> Visitor | None:
        """Who ``request`` is from; None when the auth hook names nobody."""
        if self.auth is None:
            return Visitor(ANONYMOUS, frozenset(), self._token(ANONYMOUS))
        name = self.auth(request)
        if name is None:
            return None
        if not isinstance(name, str) or not name:
            raise ConfigurationError("the auth hook returned something other than a name (str)")
        granted = self._grants(name) if callable(self._grants) else self._grants
        granted = frozenset(granted)
        _check_actions(granted)
        return Visitor(name, granted, self._token(name))

    def _token(self, name: str) -> str:
        return hmac.new(self._secret, name.encode(), hashlib.sha256).hexdigest()


def cross_site(request: Request) -> str | None:
    """Why ``request`` is not from the dashboard's own pages, or None when it is."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return None if site == "same-origin" else f"Sec-Fetch-Site is {site!r}"
    origin = request.headers.get("origin")
    if origin is not None and origin != _own_origin(request):
        return f"Origin {origin!r} is not this dashboard's"
    return None


def token_matches(visitor: Visitor, given: str | None) -> bool:
    """Whether ``given`` is the token of ``visitor``'s pages."""
    return given is not None and hmac.compare_digest(visitor.token, given)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) only ever reaches this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"


def _check_actions(granted: Collection[str]) -> None:
    unknown = sorted(set(granted) - set(ACTIONS))
    if unknown:
        raise ConfigurationError(
            f"no dashboard action is named {', '.join(map(repr, unknown))}; the actions are "
            + ", ".join(ACTIONS)
        )
