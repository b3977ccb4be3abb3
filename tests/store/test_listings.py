"""Store contract, the listings that the CLI and the dashboard read: code versions by when a
worker last ran them, and every named lease with its holder and expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from oncely.store import Store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def test_code_versions_are_listed_last_seen_first(store: Store) -> None:
    assert store.code_versions() == []
    store.see_code_version("aaaa", NOW - 3 * MINUTE)
    store.see_code_version("bbbb", NOW - 2 * MINUTE)
    store.see_code_version("aaaa", NOW)  # seen again: last seen now, first seen as before
    listed = store.code_versions()
    assert [(v.fingerprint, v.first_seen_at, v.last_seen_at) for v in listed] == [
        ("aaaa", NOW - 3 * MINUTE, NOW),
        ("bbbb", NOW - 2 * MINUTE, NOW - 2 * MINUTE),
    ]
    assert [v.fingerprint for v in store.code_versions(limit=1)] == ["aaaa"]


def test_leases_lists_held_and_expired_leases_by_name(store: Store) -> None:
    assert store.leases() == []
    held = store.acquire_lease("z-export", "host#1", 10 * MINUTE, NOW)
    stale = store.acquire_lease("a-report", "host#2", MINUTE, NOW - 5 * MINUTE)
    assert held is not None
    assert stale is not None
    assert store.leases() == [stale, held]  # expired ones too: a stale lock is worth seeing
    assert store.release_lease(stale)
    assert store.leases() == [held]
    assert store.leases(limit=0) == []


def test_job_counts_counts_the_schedules_of_each_job_not_removed(store: Store) -> None:
    from oncely.recurrence import every

    assert store.job_counts() == {}
    for tenant, key, job in ((None, "a", "report"), ("acme", "a", "report"), (None, "b", "sync")):
        store.save_schedule(
            tenant=tenant, key=key, job=job, origin="api", trigger=every(minutes=5),
            payload=None, next_run_at=NOW, now=NOW,
        )  # fmt: skip
    store.remove_schedule(None, "b", NOW)
    assert store.job_counts() == {"report": 2}


def test_running_lists_the_occurrences_under_a_lease_by_lease_expiry(store: Store) -> None:
    from oncely.model import Planned
    from oncely.recurrence import at

    assert store.running() == []
    for n, key in enumerate(("b", "a", "c")):
        when = NOW - timedelta(minutes=n + 1)
        instance = at(when).next_instance_after(when - timedelta(microseconds=1))
        assert instance is not None
        store.save_schedule(
            tenant="acme" if key == "c" else None, key=key, job="report", origin="api",
            trigger=at(when), payload=None, next_run_at=None, now=NOW,
            occurrences=[Planned(instance, origin="defer")],
        )  # fmt: skip
    claims = store.claim_due(
        owner="host#1", lease=timedelta(minutes=5), limit=2, now=NOW, jobs=["report"],
        reclaim=[], serial=[],
    )  # fmt: skip
    assert len(claims) == 2
    running = store.running()
    assert sorted(o.key for o in running) == sorted(c.key for c in claims)
    assert all(o.status == "running" and o.worker == "host#1" for o in running)
    assert [o.lease_expires_at for o in running] == sorted(o.lease_expires_at for o in running)
    assert store.running(limit=1) == running[:1]
