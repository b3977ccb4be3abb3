"""Every attempt of an occurrence is kept and listed (`App.attempts`): when each started and
ended, which worker ran it under which fence, how it ended, and the error of each failed one.
Before, the occurrence row kept only its last attempt's error, and a page showed one attempt."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from _engine_support import MakeApp

import oncely
from oncely.model import Claim
from oncely.testing import Clock


def _claim(app: oncely.App, job: str, owner: str) -> Claim:
    """Claim the one due occurrence of ``job`` as worker ``owner``, as a worker that then dies."""
    (claimed,) = app.store.claim_due(
        owner=owner, lease=timedelta(minutes=5), limit=1, now=app.now(),
        jobs=[job], reclaim=[job], serial=[job],
    )  # fmt: skip
    return claimed


def test_two_failures_then_a_success_list_three_attempts(app: oncely.App, clock: Clock) -> None:
    @app.job()
    def flaky(run: oncely.Run) -> None:
        if run.attempt < 3:
            raise RuntimeError(f"upstream answered 503 to attempt {run.attempt}")

    app.defer(flaky, at=clock(), key="f")
    ticked = []
    for _ in range(3):
        ticked.append(clock())
        app.tick()
        clock.advance(hours=1)  # past any backoff
    (row,) = app.history(key="f")
    attempts = app.attempts("f", row.scheduled_for)
    assert [(a.number, a.outcome) for a in attempts] == [
        (1, "failed"),
        (2, "failed"),
        (3, "succeeded"),
    ]
    for n, attempt in enumerate(attempts[:2], start=1):
        assert attempt.error is not None
        assert attempt.error.startswith("Traceback (most recent call last)")
        assert attempt.error.rstrip().endswith(
            f"RuntimeError: upstream answered 503 to attempt {n}"
        )
    assert attempts[2].error is None
    assert [a.started_at for a in attempts] == ticked
    assert [a.finished_at for a in attempts] == ticked
    assert {a.worker for a in attempts} == {row.worker}
    fences = [a.fence for a in attempts]
    assert fences == sorted(set(fences))
    assert fences[-1] == row.fence
    assert asyncio.run(app.attempts_async("f", row.scheduled_for)) == attempts


def test_a_lease_lost_mid_run_lists_the_lost_attempt_with_its_owner_and_fence(
    make_app: MakeApp, clock: Clock
) -> None:
    lost, rescuer = make_app(), make_app()
    for app in (lost, rescuer):

        @app.job()
        def job(run: oncely.Run) -> None:
            pass

    lost.defer("job", at=clock(), key="j")
    began = clock()
    claimed = _claim(lost, "job", "web-1#111")  # then the process dies
    clock.advance(minutes=6)
    rescuer.tick()
    (row,) = rescuer.history(key="j")
    first, second = rescuer.attempts("j", row.scheduled_for)
    assert (first.number, first.outcome, first.worker, first.fence) == (
        1,
        "lost",
        "web-1#111",
        claimed.fence,
    )
    assert (first.started_at, first.finished_at) == (began, clock())
    assert "web-1#111 was lost during attempt 1 (lease expired)" in (first.error or "")
    assert (second.number, second.outcome, second.worker) == (2, "succeeded", row.worker)
    assert second.fence == row.fence
    assert row.fence > claimed.fence


def test_a_lost_at_most_once_attempt_is_listed_abandoned(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()

    @app.job(delivery="at_most_once")
    def once(run: oncely.Run) -> None:
        pass

    app.defer(once, at=clock(), key="o")
    claimed = _claim(app, "once", "web-2#222")
    clock.advance(minutes=6)
    app.tick()
    (row,) = app.history(key="o")
    assert row.status == "abandoned"
    (attempt,) = app.attempts("o", row.scheduled_for)
    assert (attempt.number, attempt.outcome, attempt.worker, attempt.fence) == (
        1,
        "abandoned",
        "web-2#222",
        claimed.fence,
    )
    assert attempt.error == row.reason


def test_a_timed_out_attempt_is_listed_timed_out(app: oncely.App, clock: Clock) -> None:
    @app.job(timeout=timedelta(minutes=1))
    def slow(run: oncely.Run) -> None:
        pass

    app.defer(slow, at=clock(), key="s")
    engine = app._the_engine()
    (claimed,) = engine.claim(1)
    clock.advance(minutes=2)
    # What the worker books for an attempt still running past its timeout.
    engine.executor.book([engine.executor.timed_out(claimed, slow)])
    clock.advance(hours=1)
    app.tick()
    (row,) = app.history(key="s")
    first, second = app.attempts("s", row.scheduled_for)
    assert (first.outcome, first.fence) == ("timed_out", claimed.fence)
    assert (first.error or "").startswith("timed out: attempt 1 was still running")
    assert second.outcome == "succeeded"


def test_a_running_attempt_has_its_lease_and_no_error_of_the_one_before(
    app: oncely.App, clock: Clock
) -> None:
    @app.job()
    def flaky(run: oncely.Run) -> None:
        raise RuntimeError("no")

    app.defer(flaky, at=clock(), key="f")
    app.tick()
    clock.advance(hours=1)
    claimed = _claim(app, "flaky", "web-3#333")
    first, second = app.attempts("f", claimed.scheduled_for)
    assert first.outcome == "failed"
    assert (second.outcome, second.worker, second.error, second.finished_at) == (
        "running",
        "web-3#333",
        None,
        None,
    )
    assert second.lease_expires_at == claimed.lease_expires_at


def test_an_occurrence_retried_by_hand_keeps_its_failed_attempt(
    app: oncely.App, clock: Clock
) -> None:
    @app.job(retries=1)
    def once(run: oncely.Run) -> None:
        raise oncely.Terminal(f"refused on attempt {run.attempt}")

    app.defer(once, at=clock(), key="t")
    app.tick()
    (row,) = app.history(key="t")
    assert app.store.retry_failed(None, "t", row.scheduled_for, clock())
    app.tick()
    first, second = app.attempts("t", row.scheduled_for)
    assert (first.outcome, second.outcome) == ("failed", "failed")
    assert "refused on attempt 1" in (first.error or "")
    assert "refused on attempt 2" in (second.error or "")


def test_attempts_of_a_missing_occurrence_or_key_raise_unknown_schedule(
    app: oncely.App, clock: Clock, remind: oncely.Job
) -> None:
    app.defer(remind, at=clock() + timedelta(hours=1), key="r")
    assert app.attempts("r", clock() + timedelta(hours=1)) == []  # pending: none yet
    with pytest.raises(oncely.UnknownSchedule, match="has no occurrence at"):
        app.attempts("r", clock())
    with pytest.raises(oncely.UnknownSchedule):
        app.attempts("nope", clock())
