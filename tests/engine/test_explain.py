"""app.explain(key): why a schedule did or did not fire, read off the store and the trigger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import oncely
from oncely.testing import Clock


def test_explain_shows_dst_notes_skips_with_reasons_and_the_lease_holder(
    app: oncely.App, clock: Clock
) -> None:
    clock.set(datetime(2026, 3, 26, 12, 0, tzinfo=UTC))

    @app.job(oncely.cron("30 2 * * *", tz="Europe/Berlin"))
    def nightly(run: oncely.Run) -> None:
        pass

    app.tick()
    clock.advance(days=1, hours=1)  # 02:30 on the 27th was missed by far: skipped, with a reason
    app.tick()
    app.trigger("nightly")
    app.store.claim_due(
        owner="web-1#42",
        lease=timedelta(minutes=5),
        limit=1,
        now=clock(),
        jobs=["nightly"],
        reclaim=[],
        serial=[],
    )

    explained = app.explain("nightly", upcoming=3)
    assert explained.state == "active"
    assert [i.dst is not None and "gap" in i.dst for i in explained.upcoming] == [
        False,
        True,
        False,
    ]  # fmt: skip  (the 29th's 02:30 does not exist in Berlin)
    assert [o.status for o in explained.recent] == ["running", "skipped"]
    (running,) = explained.running
    assert running.worker == "web-1#42"
    assert running.lease_expires_at == clock() + timedelta(minutes=5)
    text = str(explained)
    assert "held by web-1#42" in text
    assert "beyond grace 15m" in text
    assert "DST gap" in text


def test_explain_says_why_a_schedule_cannot_fire(app: oncely.App, clock: Clock) -> None:
    @app.job(oncely.every(minutes=1), retries=1, pause_after=1)
    def sync(run: oncely.Run) -> None:
        raise RuntimeError("upstream answered 503")

    app.tick()
    clock.advance(minutes=1)
    app.tick()
    explained = app.explain("sync")
    assert explained.upcoming == []
    assert explained.state.startswith("paused (paused after 1 consecutive failed occurrences)")
    assert "upstream answered 503" in str(explained)
    with pytest.raises(oncely.UnknownSchedule):
        app.explain("nope")
    with pytest.raises(oncely.UnknownSchedule):
        app.for_tenant("acme").explain("sync")
