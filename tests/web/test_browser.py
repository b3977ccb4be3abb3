"""The dashboard as a person uses it, in a real Chromium driven by Playwright: each page of a
seeded store, each action with a grant (checked in the store and in history), and without one
no buttons and a refused POST. ``ONCELY_UPDATE_SCREENSHOTS=1`` writes the screenshots used by
docs/web.md into docs/images."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from _web_support import EVIL, Clock, build, granted_dashboard, served
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

import oncely

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
DOCS_IMAGES = Path(__file__).parents[2] / "docs" / "images"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[oncely.App, Clock, str]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('web') / 'oncely.db'}"
    app, clock = build(url)
    with served(granted_dashboard(app)) as base:
        yield app, clock, base
    app.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


def person(browser: Browser, base: str, who: str) -> BrowserContext:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "who", "value": who, "url": base}])
    return context


@pytest.fixture
def page(browser: Browser, site: tuple[oncely.App, Clock, str]) -> Iterator[Page]:
    context = person(browser, site[2], "ada")
    opened = context.new_page()
    alerts: list[str] = []

    def on_dialog(dialog: Any) -> None:
        if dialog.type == "confirm":
            dialog.accept()
        else:
            alerts.append(dialog.message)
            dialog.dismiss()

    opened.on("dialog", on_dialog)
    yield opened
    context.close()
    assert alerts == []  # stored script never ran


def shot(page: Page, name: str, tmp_path: Path) -> None:
    target = DOCS_IMAGES if os.environ.get("ONCELY_UPDATE_SCREENSHOTS") == "1" else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    image = page.screenshot(path=str(target / f"web-{name}.png"), full_page=True)
    assert image[:8] == b"\x89PNG\r\n\x1a\n"


def test_overview_shows_workers_failures_and_latest(page: Page, site: Any, tmp_path: Path) -> None:
    _, _, base = site
    page.goto(base + "/")
    expect(page.locator("h1")).to_have_text("Overview")
    expect(page.locator(".card").first).to_contain_text("2026-03-27 12:30:00Z")
    failures = page.locator("table.grid").first
    expect(failures).to_contain_text("sync")
    expect(failures).to_contain_text("RuntimeError: upstream answered 503")
    expect(page.get_by_text(EVIL).first).to_be_visible()  # the key, as text
    shot(page, "overview", tmp_path)


def test_schedules_filter_and_page(page: Page, site: Any, tmp_path: Path) -> None:
    _, _, base = site
    page.goto(base + "/schedules")
    rows = page.locator("#schedules tbody tr")
    expect(rows).to_have_count(10)
    expect(page.locator("#schedules")).to_contain_text("every 5 minutes")
    expect(page.locator("#schedules")).to_contain_text("At 09:00 on Monday through Friday")
    shot(page, "schedules", tmp_path)
    page.fill("input[name=job]", "remind")
    page.click("text=Filter")
    expect(rows).to_have_count(7)
    jobs = page.locator("#schedules tbody tr td:nth-child(2)").all_inner_texts()
    assert set(jobs) == {"remind"}
    page.goto(base + "/schedules?limit=4")
    first = page.locator("#schedules tbody tr td:first-child").all_inner_texts()
    page.click("a[rel=next]")
    second = page.locator("#schedules tbody tr td:first-child").all_inner_texts()
    assert len(first) == 4
    assert second
    assert not set(first) & set(second)


def test_a_schedule_shows_timeline_explain_upcoming_and_history(
    page: Page, site: Any, tmp_path: Path
) -> None:
    _, _, base = site
    page.goto(base + "/schedules/sync")
    expect(page.locator(".timeline .cell.s-failed")).to_have_count(3)
    expect(page.locator("pre.explain")).to_contain_text("sync: job sync, every 10 minutes, active")
    expect(page.locator("pre.explain")).to_contain_text("worker last seen")
    expect(page.locator("section:has(h2:text('Upcoming')) tbody tr")).to_have_count(10)
    shot(page, "schedule", tmp_path)
    page.goto(base + "/schedules/nightly")
    gap = page.locator("tr:has-text('Sun 2026-03-29')")
    expect(gap).to_contain_text("DST gap")


def test_an_occurrence_shows_its_error_and_idempotency_key(
    page: Page, site: Any, tmp_path: Path
) -> None:
    app, clock, base = site
    page.goto(base + "/schedules/sync")
    page.locator(".timeline .cell").first.click()
    expect(page.locator("h1")).to_contain_text("sync at 2026-03-27 12:10:00Z")
    expect(page.locator("pre.error")).to_contain_text("Traceback (most recent call last)")
    expect(page.locator("dl.facts")).to_contain_text("/sync/2026-03-27T12:10:00+00:00")
    expect(page.locator("table.attempts #attempt-1")).to_contain_text("failed")
    expect(page.locator("table.attempts pre.attempt-error")).to_contain_text("Traceback")
    shot(page, "occurrence", tmp_path)
    beat = clock.now - timedelta(seconds=20)
    app.store.beat(oncely.model.WorkerBeat("web-1#11", beat, beat, "1.2.3", "c0ffee" * 8))
    for path in ("/workers", "/locks", "/drift"):
        page.goto(base + path)
        expect(page.locator("h1")).to_have_text(path[1:].capitalize())
        if path == "/workers":
            expect(page.locator("#workers tr.live")).to_contain_text("live 20 s ago")
    expect(page.locator("#unscheduled")).to_contain_text("export")


def act(page: Page, action: str, reason: str) -> None:
    form = page.locator(f"form.action:has(button[value={action}])")
    form.locator("input[name=reason]").fill(reason)
    form.locator("button").click()


def test_each_action_with_a_grant_changes_the_store_and_is_recorded(page: Page, site: Any) -> None:
    app, clock, base = site
    clock.now += timedelta(minutes=1)
    now = clock.now
    page.goto(base + "/schedules/beat")
    act(page, "trigger", "customer asked for a fresh run")
    expect(page.locator("#actions")).to_contain_text("customer asked for a fresh run")
    triggered = app.history("beat", since=now, until=now + timedelta(seconds=1))
    assert [o.origin for o in triggered] == ["trigger"]

    page.locator("form.action:has(button[value=pause]) input[name=until]").fill(
        "2026-03-27T14:00:00"
    )
    act(page, "pause", "vendor outage")
    expect(page.locator("button[value=resume]")).to_be_visible()
    expect(page.locator("p.facts")).to_contain_text("paused until 2026-03-27 14:00:00")
    beat = next(s for s in app.schedules(key_prefix="beat") if s.key == "beat")
    assert (beat.paused, beat.paused_until) == (True, datetime(2026, 3, 27, 14, tzinfo=UTC))
    act(page, "resume", "vendor back")
    expect(page.locator("button[value=pause]")).to_be_visible()
    assert not next(s for s in app.schedules(key_prefix="beat") if s.key == "beat").paused

    form = page.locator("form.action:has(button[value=backfill])")
    form.locator("input[name=since]").fill("2026-03-27T10:00:00")
    form.locator("input[name=until]").fill("2026-03-27T10:30:00")
    act(page, "backfill", "missed during the migration")
    expect(page.locator("#preview tbody tr")).to_have_count(7)
    assert app.history("beat", since=now - timedelta(hours=2), until=now - timedelta(hours=1)) == []
    page.click("text=Confirm backfill")
    expect(page.locator("#actions")).to_contain_text("7 created or re-armed")
    filled = app.history("beat", since=now - timedelta(hours=3), until=now - timedelta(hours=1))
    assert len(filled) == 7

    failed = app.history("sync", status="failed", limit=1)[0].scheduled_for
    page.goto(f"{base}/schedules/sync/occurrences/{quote(failed.isoformat(), safe='')}")
    act(page, "retry", "upstream fixed")
    expect(page.locator("dl.facts")).to_contain_text("retrying")
    assert app.history("sync", since=failed, until=failed + timedelta(seconds=1))[0].status == (
        "retrying"
    )

    stale = app.store.acquire_lease("export-lock", "gone#1", timedelta(minutes=1), now)
    assert stale is not None
    page.goto(base + "/locks")
    row = page.locator("#locks tr:has-text('export-lock')")
    row.locator("input[name=reason]").fill("holder crashed")
    row.locator("button").click()
    expect(page.locator("#locks")).not_to_contain_text("export-lock")
    assert all(lease.name != "export-lock" for lease in app.store.leases())

    recorded = {(a.action, a.actor) for a in app.store.actions(None, None)}
    assert {"trigger", "pause", "resume", "backfill", "retry", "release"} == {
        action for action, actor in recorded if actor == "ada"
    }


def test_without_a_grant_no_buttons_and_the_post_is_refused(browser: Browser, site: Any) -> None:
    app, _, base = site
    context = person(browser, base, "bob")
    page = context.new_page()
    page.goto(base + "/schedules/beat")
    expect(page.locator("header .who")).to_have_text(re.compile("bob · read-only"))
    expect(page.locator("form[method=post]")).to_have_count(0)
    page.goto(base + "/locks")
    expect(page.locator("form[method=post]")).to_have_count(0)
    refused = page.request.post(
        base + "/schedules/beat/pause",
        form={"reason": "sneaky", "csrf": "x"},
        headers={"Sec-Fetch-Site": "same-origin"},
    )
    assert refused.status == 403
    assert "not granted" in refused.text()
    assert not next(s for s in app.schedules(key_prefix="beat") if s.key == "beat").paused
    context.close()


def test_a_page_refreshes_itself_when_the_store_changes(page: Page, site: Any) -> None:
    app, clock, base = site
    page.goto(base + "/schedules/digest")
    expect(page.locator("#actions")).to_contain_text("nobody has acted")
    clock.now += timedelta(minutes=1)
    app.trigger("digest")
    app.store.record_action(
        oncely.model.Action(clock.now, "digest", None, "trigger", "cli", "from a script")
    )
    expect(page.locator("#actions")).to_contain_text("from a script", timeout=10_000)


def test_a_hidden_tab_does_not_refresh_until_shown_again(page: Page, site: Any) -> None:
    app, clock, base = site
    page.goto(base + "/schedules/beat")
    hide = """hidden => {
        Object.defineProperty(document, "hidden", {value: hidden, configurable: true});
        document.dispatchEvent(new Event("visibilitychange"));
    }"""
    page.evaluate(hide, True)
    clock.now += timedelta(minutes=1)
    app.store.record_action(
        oncely.model.Action(clock.now, "beat", None, "pause", "cli", "while hidden")
    )
    page.wait_for_timeout(6_500)  # longer than the 5 s poll
    expect(page.locator("#actions")).not_to_contain_text("while hidden")
    page.evaluate(hide, False)
    expect(page.locator("#actions")).to_contain_text("while hidden", timeout=3_000)
