"""Each claim is leased for its own job's ``lease``, not the longest of the app's jobs."""

from __future__ import annotations

from datetime import timedelta

from _engine_support import MakeApp

import oncely
from oncely.testing import Clock


def test_each_claim_takes_its_own_jobs_lease(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()

    @app.job(lease=timedelta(seconds=30))
    def short(run: oncely.Run) -> None:
        pass

    @app.job()
    def default(run: oncely.Run) -> None:
        pass

    @app.job(lease=timedelta(hours=1))
    def long(run: oncely.Run) -> None:
        pass

    for job in (short, default, long):
        app.defer(job, at=clock(), key=f"{job.name}:1")
    claims = app._the_engine().claim(10)
    leases = {c.job: c.lease_expires_at - clock() for c in claims}
    assert leases == {
        "short": timedelta(seconds=30),
        "default": timedelta(minutes=5),
        "long": timedelta(hours=1),
    }


def test_a_lost_workers_short_lease_occurrence_is_rerun_after_its_own_lease(
    make_app: MakeApp, clock: Clock
) -> None:
    lost, rescuer = make_app(), make_app()
    ran: list[str] = []
    for app in (lost, rescuer):

        @app.job(lease=timedelta(seconds=30))
        def short(run: oncely.Run) -> None:
            ran.append(run.key)

        @app.job()
        def default(run: oncely.Run) -> None:
            pass

    lost.defer("short", at=clock(), key="s")
    assert [c.key for c in lost._the_engine().claim(10)] == ["s"]  # then the process dies
    clock.advance(seconds=31)
    rescuer.tick()
    assert ran == ["s"]
    assert rescuer.history(key="s")[0].attempts == 2


def test_claims_take_turns_between_lease_groups(make_app: MakeApp, clock: Clock) -> None:
    app = make_app()

    @app.job(lease=timedelta(seconds=30), overlap="allow")
    def short(run: oncely.Run) -> None:
        pass

    @app.job(overlap="allow")
    def default(run: oncely.Run) -> None:
        pass

    for n in range(4):
        app.defer(short, at=clock(), key=f"s{n}")
        app.defer(default, at=clock(), key=f"d{n}")
    engine = app._the_engine()
    turns = [[c.key for c in engine.claim(2)] for _ in range(5)]
    # The groups in lease order, each in turn taking the whole limit; then nothing is left.
    assert turns == [["s0", "s1"], ["d0", "d1"], ["s2", "s3"], ["d2", "d3"], []]
