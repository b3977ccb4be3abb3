"""Pausing from the dashboard until a time: the form's optional end, its record, its refusals."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from _web_support import ada, build, call, granted_dashboard, token_of

import oncely


@pytest.fixture
def app(sqlite_url: str) -> Iterator[oncely.App]:
    made, _ = build(sqlite_url)
    yield made
    made.close()


def pause(asgi: object, **fields: str) -> object:
    form = {"csrf": token_of(asgi), "reason": "vendor outage", **fields}
    return call(asgi, "POST", "/schedules/beat/pause", headers=ada(""), form=form)


def test_a_pause_with_an_end_says_so_on_the_page_its_twin_and_its_record(
    app: oncely.App,
) -> None:
    asgi = granted_dashboard(app)
    done = pause(asgi, until="2026-03-27T14:00:00")
    assert done.status == 303, done.body  # type: ignore[attr-defined]
    (recorded,) = app.store.actions(None, "beat")
    assert (recorded.actor, recorded.reason, recorded.detail) == (
        "ada", "vendor outage", "paused until 2026-03-27T14:00:00Z",
    )  # fmt: skip
    page = call(asgi, "GET", "/schedules/beat", headers={"cookie": "who=ada"}).body
    assert "paused until 2026-03-27 14:00:00" in page
    assert "resumes by itself" in page
    twin = json.loads(call(asgi, "GET", "/api/schedules/beat", headers={"cookie": "who=ada"}).body)
    assert (twin["paused"], twin["paused_until"]) == (True, "2026-03-27T14:00:00+00:00")


def test_the_pause_form_offers_an_optional_end(app: oncely.App) -> None:
    page = call(granted_dashboard(app), "GET", "/schedules/beat", headers={"cookie": "who=ada"})
    form = page.body.split('action="/schedules/beat/pause"', 1)[1].split("</form>", 1)[0]
    assert 'name="until"' in form
    assert 'name="until" required' not in form


@pytest.mark.parametrize(
    ("until", "says"),
    [
        ("soon", "soon&#39; is not a time"),
        ("2026-03-27T11:00:00", "is not in the future (now is 2026-03-27T12:30:00+00:00)"),
    ],
)
def test_a_pause_until_no_future_time_is_400_and_changes_nothing(
    app: oncely.App, until: str, says: str
) -> None:
    done = pause(granted_dashboard(app), until=until)
    assert done.status == 400  # type: ignore[attr-defined]
    assert says in done.body  # type: ignore[attr-defined]
    assert not next(s for s in app.schedules() if s.key == "beat").paused
    assert app.store.actions(None, "beat") == []
