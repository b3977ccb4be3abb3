"""Store contract, housekeeping records and pruning: old history goes, what the engine works from
stays, and what it decides does not change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from oncely import at, every
from oncely.model import Claim, Planned, Sweep
from oncely.store import Store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
BEFORE = NOW - timedelta(days=30)  # the retention horizon
OLD = BEFORE - timedelta(days=1)
RECENT = BEFORE + timedelta(days=1)
LEASE = timedelta(minutes=5)
MINUTE = timedelta(minutes=1)


def defer(store: Store, key: str, when: datetime, job: str) -> None:
    instance = at(when).next_instance_after(when - timedelta(microseconds=1))
    assert instance is not None
    store.save_schedule(
        tenant=None,
        key=key,
        job=job,
        origin="api",
        trigger=at(when),
        payload=None,
        next_run_at=None,
        now=when,
        occurrences=[Planned(instance, origin="defer")],
    )


def claimed(store: Store, key: str, when: datetime, job: str) -> Claim:
    """Defer ``key`` to ``when`` and claim it then (each job its own, so claims never mix)."""
    defer(store, key, when, job)
    (claim,) = store.claim_due(
        owner="host#1", lease=LEASE, limit=1, now=when, jobs=[job], reclaim=(), serial=()
    )
    assert claim.key == key
    return claim


def finished(store: Store, key: str, when: datetime, status: str, done: datetime) -> None:
    """An occurrence of ``key`` scheduled at ``when`` that reached ``status`` at ``done``."""
    claim = claimed(store, key, when, status)
    if status == "succeeded":
        store.book_success([claim], done)
    elif status == "failed":
        store.book_failure(claim, done, error="boom", retry_at=None, pause_after=None)
    elif status == "abandoned":
        assert store.abandon_expired(now=done, jobs=[status], reason="lost")
    else:
        raise AssertionError(status)


def skipped(store: Store, key: str, when: datetime) -> None:
    """A skipped occurrence (it never ran: no finished_at) scheduled at ``when``."""
    trigger = every(hours=1)
    store.save_schedule(
        tenant=None,
        key=key,
        job="sync",
        origin="api",
        trigger=trigger,
        payload=None,
        next_run_at=when,
        now=when,
    )
    instance = trigger.next_instance_after(when - timedelta(microseconds=1))
    assert instance is not None
    store.add_occurrences(None, key, [Planned(instance, "skipped", "misfire")], now=when)


def invalid(store: Store, key: str, when: datetime) -> None:
    """The invalid occurrence that records why schedule ``key`` stopped at ``when``."""
    store.save_schedule(
        tenant=None,
        key=key,
        job="sync",
        origin="api",
        trigger=every(hours=1),
        payload=None,
        next_run_at=when,
        now=when,
    )
    store.mark_invalid([(None, key, "its rule no longer reads")], when)


def statuses(store: Store) -> dict[str, str]:
    return {o.key: o.status for o in store.history(None, limit=1000)}


def test_prune_deletes_only_finished_occurrences_that_finished_before(store: Store) -> None:
    finished(store, "old-succeeded", OLD, "succeeded", OLD + MINUTE)
    finished(store, "old-failed", OLD + MINUTE, "failed", OLD + 2 * MINUTE)
    finished(store, "old-abandoned", OLD + 2 * MINUTE, "abandoned", OLD + LEASE + 2 * MINUTE)
    skipped(store, "old-skipped", OLD)
    invalid(store, "old-invalid", OLD)
    # never deleted, however old: what the engine works from
    defer(store, "old-pending", OLD, "pending")
    claimed(store, "old-running", OLD, "running")
    retry = claimed(store, "old-retrying", OLD, "retrying")
    store.book_failure(retry, OLD + MINUTE, error="boom", retry_at=OLD + LEASE, pause_after=None)
    # finished at or after the horizon: kept
    finished(store, "ran-late", OLD + 3 * MINUTE, "succeeded", RECENT)  # scheduled long before
    finished(store, "at-horizon", BEFORE - MINUTE, "succeeded", BEFORE)
    skipped(store, "skipped-at-horizon", BEFORE)
    skipped(store, "recent-skipped", RECENT)

    assert store.prune(BEFORE, 100) == 5
    assert statuses(store) == {
        "old-pending": "pending",
        "old-running": "running",
        "old-retrying": "retrying",
        "ran-late": "succeeded",
        "at-horizon": "succeeded",
        "skipped-at-horizon": "skipped",
        "recent-skipped": "skipped",
    }
    # the schedules stay, pruned history or not
    kept = {s.key for s in store.list_schedules(None)}
    assert {"old-succeeded", "old-skipped", "old-invalid", "old-abandoned"} <= kept
    assert store.prune(BEFORE, 100) == 0


def test_prune_goes_in_batches_of_at_most_limit(store: Store) -> None:
    for n in range(7):
        finished(store, f"k{n}", OLD + n * MINUTE, "succeeded", OLD + (n + 1) * MINUTE)
    batches = [store.prune(BEFORE, 3) for _ in range(4)]
    # PostgreSQL drops the day's partition whole (Store.prune), SQLite deletes rows in batches.
    assert batches == ([7, 0, 0, 0] if store.dialect == "postgres" else [3, 3, 1, 0])
    assert store.history(None) == []


def sweep(worker: str, finished_at: datetime, error: str | None = None) -> Sweep:
    return Sweep(
        worker=worker,
        started_at=finished_at - timedelta(seconds=2),
        finished_at=finished_at,
        pruned=10,
        reclaimed=1,
        abandoned=0,
        error=error,
    )


def test_sweeps_are_listed_newest_first(store: Store) -> None:
    assert store.sweeps() == []
    first, second = sweep("host#1", NOW - MINUTE), sweep("host#2", NOW, error="StoreUnavailable")
    older = sweep("host#3", NOW - 2 * MINUTE)
    for recorded in (first, second, older):  # recorded out of order
        store.record_sweep(recorded)
    assert store.sweeps() == [second, first, older]
    assert store.sweeps(limit=1) == [second]


def test_prune_deletes_the_sweeps_that_finished_before(store: Store) -> None:
    store.record_sweep(sweep("host#1", OLD))
    store.record_sweep(sweep("host#1", BEFORE))
    store.record_sweep(sweep("host#1", RECENT))
    assert store.prune(BEFORE, 100) == 0  # counts occurrences only
    assert [s.finished_at for s in store.sweeps()] == [RECENT, BEFORE]


def test_pruning_leaves_the_failure_count_behind_pause_after(store: Store) -> None:
    trigger = every(hours=1)
    store.save_schedule(
        tenant=None,
        key="flaky",
        job="sync",
        origin="code",
        trigger=trigger,
        payload=None,
        next_run_at=OLD,
        now=OLD,
    )
    for n in range(3):
        when = OLD + n * timedelta(hours=1)
        instance = trigger.next_instance_after(when - timedelta(microseconds=1))
        assert instance is not None
        store.add_occurrences(None, "flaky", [Planned(instance)], now=when)
        (claim,) = store.claim_due(
            owner="host#1", lease=LEASE, limit=1, now=when, jobs=["sync"], reclaim=(), serial=()
        )
        if n == 2:
            store.prune(BEFORE, 100)  # the two failures before are gone from history
            assert len(store.history(None)) == 1
        failure = store.book_failure(claim, when, error="boom", retry_at=None, pause_after=3)
    assert (failure.consecutive_failures, failure.paused) == (3, True)


def test_pruning_leaves_the_overlap_check(store: Store) -> None:
    trigger = every(hours=1)
    store.save_schedule(
        tenant=None,
        key="slow",
        job="sync",
        origin="code",
        trigger=trigger,
        payload=None,
        next_run_at=OLD,
        now=OLD,
    )
    first = trigger.next_instance_after(OLD - timedelta(microseconds=1))
    assert first is not None
    store.materialise(
        None, "slow", [Planned(first)], expected_next_run_at=OLD, next_run_at=NOW, now=OLD
    )
    store.claim_due(
        owner="host#1", lease=NOW - OLD, limit=1, now=OLD, jobs=["sync"], reclaim=(), serial=()
    )  # still running a month later, under a long lease
    store.prune(BEFORE, 100)
    later = trigger.next_instance_after(NOW - timedelta(microseconds=1))
    assert later is not None
    store.materialise(
        None,
        "slow",
        [Planned(later)],
        expected_next_run_at=NOW,
        next_run_at=NOW + timedelta(hours=1),
        now=NOW,
        overlap="skip",
    )
    assert [o.status for o in store.history(None)] == ["skipped", "running"]


def test_pruning_keeps_every_code_version_so_an_old_one_stays_old(store: Store) -> None:
    # Pruned once unseen for the retention, an old release started again counted as brand new:
    # newer than the live one, whose schedules it then replaced (issue 21.5).
    store.see_code_version("v1", OLD - MINUTE)
    store.mark_code_applied("v1", OLD - MINUTE)
    store.see_code_version("v2", OLD)
    store.mark_code_applied("v2", OLD)
    store.see_code_version("v2-never-applied", OLD)
    store.prune(BEFORE, 100)
    old, applied = store.see_code_version("v1", NOW)
    assert old.first_seen_at == OLD - MINUTE
    assert applied is not None
    assert applied.fingerprint == "v2"
    never, _ = store.see_code_version("v2-never-applied", NOW)
    assert never.first_seen_at == OLD


def test_a_status_kept_longer_stays_past_the_rest(store: Store) -> None:
    # retention="30d,failed=90d": failures are kept three times as long as the rest.
    long_ago = BEFORE - timedelta(days=70)  # past both
    between = BEFORE - timedelta(days=10)  # past the rest, not past failures
    finished(store, "ancient-failed", long_ago, "failed", long_ago + MINUTE)
    finished(store, "ancient-ok", long_ago, "succeeded", long_ago + MINUTE)
    finished(store, "kept-failed", between, "failed", between + MINUTE)
    finished(store, "gone-ok", between, "succeeded", between + MINUTE)
    finished(store, "recent-ok", RECENT, "succeeded", RECENT + MINUTE)
    failures_before = BEFORE - timedelta(days=60)
    while store.prune(BEFORE, 1000, by_status={"failed": failures_before}) == 1000:
        pass
    assert sorted(o.key for o in store.history(None)) == ["kept-failed", "recent-ok"]
    assert store.prune(BEFORE, 1000, by_status={"failed": failures_before}) == 0
    # Nothing the horizon stands for is gone: it is the later of the two times.
    horizon = store.history_horizon()
    assert horizon is not None
    assert horizon <= BEFORE
    assert horizon > failures_before
