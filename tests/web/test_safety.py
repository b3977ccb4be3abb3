"""The dashboard's safety, request by request: nothing changes without a grant, a cross-site
POST or one without the page's token is refused, a dashboard without auth answers this machine
only and `oncely web` will not serve it elsewhere, and stored markup is shown as text."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _web_support import EVIL, ada, build, call, granted_dashboard, token_of

import oncely
from oncely.errors import ConfigurationError
from oncely.web import dashboard


@pytest.fixture
def app(sqlite_url: str) -> Iterator[oncely.App]:
    made, _ = build(sqlite_url)
    yield made
    made.close()


def paused(app: oncely.App, key: str) -> bool:
    return next(s for s in app.schedules(key_prefix=key, limit=None) if s.key == key).paused


def test_a_granted_same_origin_post_with_the_token_acts(app: oncely.App) -> None:
    asgi = granted_dashboard(app)
    form = {"csrf": token_of(asgi), "reason": "maintenance"}
    done = call(asgi, "POST", "/schedules/beat/pause", headers=ada(""), form=form)
    assert done.status == 303, done.body
    assert paused(app, "beat")
    (recorded,) = app.store.actions(None, "beat")
    assert (recorded.action, recorded.actor, recorded.reason) == ("pause", "ada", "maintenance")


@pytest.mark.parametrize(
    "headers",
    [
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
        {"origin": "https://evil.example"},
    ],
)
def test_a_cross_site_post_is_refused_and_changes_nothing(
    app: oncely.App, headers: dict[str, str]
) -> None:
    asgi = granted_dashboard(app)
    form = {"csrf": token_of(asgi), "reason": "x"}
    sent = {"cookie": "who=ada", **headers}
    done = call(asgi, "POST", "/schedules/beat/pause", headers=sent, form=form)
    assert done.status == 403
    assert "cross-site" in done.body
    assert not paused(app, "beat")
    assert app.store.actions(None, "beat") == []


@pytest.mark.parametrize("token", ["", "0" * 64, "bob's"])
def test_a_post_without_the_persons_token_is_refused(app: oncely.App, token: str) -> None:
    asgi = granted_dashboard(app)
    done = call(
        asgi, "POST", "/schedules/beat/pause", headers=ada(""), form={"csrf": token, "reason": "x"}
    )
    assert done.status == 403
    assert "token" in done.body
    assert not paused(app, "beat")


def test_without_a_grant_there_are_no_buttons_and_the_post_is_refused(app: oncely.App) -> None:
    asgi = granted_dashboard(app)
    page = call(asgi, "GET", "/schedules/beat", headers={"cookie": "who=bob"})
    assert page.status == 200
    assert '<form method="post"' not in page.body
    assert "read-only" in page.body
    form = {"csrf": token_of(asgi, "ada"), "reason": "x"}
    sent = {"cookie": "who=bob", "sec-fetch-site": "same-origin"}
    for action in ("trigger", "pause", "resume", "backfill", "retry"):
        done = call(asgi, "POST", f"/schedules/beat/{action}", headers=sent, form=form)
        assert done.status == 403, action
        assert "not granted" in done.body
    assert not paused(app, "beat")


def test_read_only_without_auth_and_no_one_signed_in_is_401(app: oncely.App) -> None:
    plain = dashboard(app)
    assert '<form method="post"' not in call(plain, "GET", "/schedules/beat").body
    refused = call(plain, "POST", "/schedules/beat/pause", form={"reason": "x"})
    assert refused.status == 403
    assert call(granted_dashboard(app), "GET", "/").status == 401  # no cookie: nobody


def test_grants_without_auth_or_unknown_actions_are_configuration_errors(app: oncely.App) -> None:
    with pytest.raises(ConfigurationError, match="auth hook"):
        dashboard(app, grants={"pause"})
    with pytest.raises(ConfigurationError, match="no dashboard action is named 'delete'"):
        dashboard(app, auth=lambda request: "ada", grants={"delete"})


def test_a_dashboard_without_auth_answers_only_loopback_clients(app: oncely.App) -> None:
    plain = dashboard(app)
    assert call(plain, "GET", "/", client="127.0.0.1").status == 200
    assert call(plain, "GET", "/", client="::1").status == 200
    far = call(plain, "GET", "/", client="203.0.113.9")
    assert far.status == 403
    assert "this machine only" in far.body


@pytest.mark.parametrize("address", ["0.0.0.0:8400", "203.0.113.9:8400", "[::]:8400"])
def test_oncely_web_refuses_to_bind_beyond_loopback_without_auth(
    tmp_path: Path, address: str
) -> None:
    (tmp_path / "tasks_web.py").write_text(
        f"import oncely\napp = oncely.App({f'sqlite:///{tmp_path}/x.db'!r})\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "oncely.cli", "web", "tasks_web:app", "--http", address],
        cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "reachable from other machines" in done.stderr
    assert "--auth" in done.stderr


def test_markup_in_keys_payloads_and_errors_is_shown_as_text(app: oncely.App) -> None:
    asgi = granted_dashboard(app)
    headers = {"cookie": "who=ada"}
    from urllib.parse import quote

    pages = ["/", "/schedules", f"/schedules/{quote(EVIL, safe='')}"]
    occurrence = app.history(EVIL, status="failed", limit=1)[0].scheduled_for
    pages.append(f"/schedules/{quote(EVIL, safe='')}/occurrences/{quote(occurrence.isoformat())}")
    for path in pages:
        page = call(asgi, "GET", path, headers=headers)
        assert page.status == 200, (path, page.body)
        assert "<script>alert" not in page.body, path
        assert "onerror=alert" not in page.body.replace("onerror=alert(&#39;", ""), path
        assert "&lt;script&gt;alert(" in page.body, path
    api = call(asgi, "GET", f"/api/schedules/{quote(EVIL, safe='')}", headers=headers)
    assert api.headers["content-type"] == "application/json"
    assert EVIL in api.body  # JSON carries it as data; only HTML is escaped


def test_the_core_never_imports_the_dashboard(sqlite_url: str) -> None:
    code = f"import sys, oncely, oncely.cli.jobs; app = oncely.App({sqlite_url!r}); app.tick(); "
    code += "print(any(m.startswith(('oncely.web', 'starlette', 'jinja2')) for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
