"""Store contract, giving work back: a lost worker's occurrences (reclaim_expired) and a stopping
worker's claims that never started (release)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from oncely import at
from oncely.errors import StoreError
from oncely.model import Claim, Planned, Reclaimed
from oncely.store import PostgresStore, Store, open_store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
EXPIRED = NOW + LEASE
TICK = timedelta(microseconds=1)


def defer(store: Store, key: str, job: str = "sync", when: datetime = NOW) -> None:
    instance = at(when).next_instance_after(when - TICK)
    assert instance is not None
    store.save_schedule(
        tenant=None,
        key=key,
        job=job,
        origin="api",
        trigger=at(when),
        payload=None,
        next_run_at=None,
        now=NOW,
        occurrences=[Planned(instance, origin="defer")],
    )


def claim(
    store: Store,
    now: datetime = NOW,
    *,
    jobs: tuple[str, ...] = ("sync",),
    reclaim: tuple[str, ...] = (),
    serial: tuple[str, ...] = (),
    limit: int = 100,
    owner: str = "host#1",
) -> list[Claim]:
    return store.claim_due(
        owner=owner,
        lease=LEASE,
        limit=limit,
        now=now,
        jobs=jobs,
        reclaim=reclaim,
        serial=serial,
    )


# --- reclaim_expired ----------------------------------------------------------------------------


def test_a_lost_attempt_with_attempts_left_is_retried_at_once(store: Store) -> None:
    defer(store, "d")
    (first,) = claim(store)
    assert store.reclaim_expired(EXPIRED - TICK, {"sync": 3}) == []  # lease still live
    (reclaimed,) = store.reclaim_expired(EXPIRED, {"sync": 3})  # expires_at <= now
    assert reclaimed == Reclaimed("d", None, NOW, "host#1", 1, "retrying")
    (row,) = store.history(None)
    assert (row.status, row.retry_at, row.lease_expires_at, row.finished_at) == (
        "retrying",
        EXPIRED,
        None,
        EXPIRED,
    )
    assert row.error == "worker host#1 was lost during attempt 1 (lease expired)"
    assert store.next_due_at() == EXPIRED
    assert store.book_success([first], EXPIRED) == []  # the lost worker books nothing
    (second,) = claim(store, EXPIRED, owner="host#2")
    assert (second.attempt, second.reclaimed) == (2, False)
    assert second.fence > first.fence


def test_a_running_attempt_with_no_lease_at_all_is_refused_or_reclaimed_by_the_sweep(
    store: Store,
) -> None:
    # No path writes such a row, and PostgreSQL's running_has_lease constraint refuses one; on
    # SQLite (which cannot add the constraint) a row edited so by hand is the sweep's to reclaim:
    # the claim no longer looks for it, since reading every running row to find it cost each claim.
    defer(store, "d")
    claim(store)
    if isinstance(store, PostgresStore):
        with pytest.raises(StoreError, match="running_has_lease"), store.transaction() as c:
            c.execute("UPDATE oncely_occurrences SET lease_expires_at = NULL")
        return
    with store.transaction() as connection:
        connection.execute("UPDATE oncely_occurrences SET lease_expires_at = NULL")
    assert claim(store, NOW + TICK, reclaim=("sync",)) == []
    (reclaimed,) = store.reclaim_expired(NOW + TICK, {"sync": 3})
    assert (reclaimed.key, reclaimed.status) == ("d", "retrying")


def test_a_lost_last_attempt_fails_and_counts_towards_pause_after(store: Store) -> None:
    defer(store, "d")
    claim(store)
    (reclaimed,) = store.reclaim_expired(EXPIRED, {"sync": 1})
    assert reclaimed.status == "failed"
    (row,) = store.history(None)
    assert row.status == "failed"
    assert row.error == (
        "worker host#1 was lost during attempt 1 (lease expired) and that was the last of 1 "
        "attempts"
    )
    assert store.next_due_at() is None
    # the schedule's streak counts it: the next final failure is the second in a row
    instance = at(NOW + LEASE).next_instance_after(NOW)
    assert instance is not None
    store.add_occurrences(None, "d", [Planned(instance, origin="trigger")], now=NOW)
    (again,) = claim(store, EXPIRED)
    assert again.failure_streak == 1
    failure = store.book_failure(again, EXPIRED, error="boom", retry_at=None, pause_after=2)
    assert (failure.consecutive_failures, failure.paused) == (2, True)


def test_only_the_named_jobs_with_expired_leases_are_reclaimed(store: Store) -> None:
    defer(store, "mine")
    defer(store, "at-most-once", job="once")
    defer(store, "live", when=NOW + LEASE)
    claim(store, jobs=("sync", "once"))
    claim(store, NOW + LEASE)  # "live": its lease runs to NOW + 2 * LEASE
    reclaimed = store.reclaim_expired(EXPIRED, {"sync": 5})
    assert [r.key for r in reclaimed] == ["mine"]
    assert store.reclaim_expired(EXPIRED, {}) == []
    assert {o.key: o.status for o in store.history(None)} == {
        "mine": "retrying",
        "at-most-once": "running",
        "live": "running",
    }


def test_a_lost_attempt_of_a_removed_schedule_is_not_retried(store: Store) -> None:
    defer(store, "gone")
    claim(store)
    store.remove_schedule(None, "gone", NOW)
    (reclaimed,) = store.reclaim_expired(EXPIRED, {"sync": 5})
    assert reclaimed.status == "failed"
    (row,) = store.history(None)
    assert row.status == "failed"
    assert row.error is not None
    assert "removed" in row.error


def test_reclaims_and_claims_racing_take_each_occurrence_once(store: Store) -> None:
    # Each round, two reclaimers and two claimers see the same expired leases at the same moment:
    # each occurrence goes to exactly one of them. (The reclaims' `now` is a tick later, so that
    # what they put back to retrying is not yet due for the claims: a claim taking it after that
    # would be a second, honest, win.)
    url = f"sqlite:///{store.path}" if store.dialect == "sqlite" else store.conninfo  # type: ignore[attr-defined]
    racers = [open_store(url) for _ in range(4)]
    reclaimed: list[Reclaimed] = []
    claimed: list[Claim] = []
    lock = threading.Lock()
    keys: list[str] = []

    def reclaim_all(racer: Store, barrier: threading.Barrier) -> None:
        barrier.wait()
        got = racer.reclaim_expired(EXPIRED + TICK, {"sync": 5})
        with lock:
            reclaimed.extend(got)

    def claim_all(racer: Store, n: int, barrier: threading.Barrier) -> None:
        barrier.wait()
        while batch := claim(racer, EXPIRED, reclaim=("sync",), limit=1, owner=f"host#{n}"):
            with lock:
                claimed.extend(batch)

    for round in range(8):
        fresh = [f"r{round}-{n}" for n in range(6)]
        for key in fresh:
            defer(store, key)
        keys += fresh
        assert len(claim(store)) == len(fresh)  # their worker is then lost
        barrier = threading.Barrier(len(racers))
        threads = [
            threading.Thread(target=reclaim_all, args=(racers[0], barrier)),
            threading.Thread(target=reclaim_all, args=(racers[1], barrier)),
            threading.Thread(target=claim_all, args=(racers[2], 2, barrier)),
            threading.Thread(target=claim_all, args=(racers[3], 3, barrier)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    for racer in racers:
        racer.close()
    by_reclaim = [r.key for r in reclaimed]
    by_claim = [c.key for c in claimed]
    assert sorted(by_reclaim + by_claim) == sorted(keys)  # each once, by one side only
    history = {o.key: o for o in store.history(None, limit=1000)}
    assert all(history[k].status == "retrying" for k in by_reclaim)
    assert all(history[c.key].status == "running" for c in claimed)
    assert all(history[c.key].worker == c.owner for c in claimed)


# --- release ------------------------------------------------------------------------------------


def test_a_released_first_attempt_is_pending_again_and_taken_at_once(store: Store) -> None:
    defer(store, "d")
    (first,) = claim(store)
    assert store.release([first], NOW + timedelta(seconds=1)) == 1
    (row,) = store.history(None)
    assert (row.status, row.attempts, row.started_at, row.finished_at, row.worker) == (
        "pending",
        0,
        None,
        None,
        None,
    )
    assert row.lease_expires_at is None
    assert store.next_due_at() == NOW
    (again,) = claim(store, NOW + timedelta(seconds=1), owner="host#2")
    assert (again.attempt, again.reclaimed) == (1, False)
    assert again.fence > first.fence
    assert store.book_success([first], NOW) == []  # the released claim books nothing


def test_a_released_retry_keeps_its_attempt_number_and_error(store: Store) -> None:
    defer(store, "d")
    (first,) = claim(store)
    store.book_failure(
        first, NOW, error="boom", retry_at=NOW + timedelta(seconds=10), pause_after=None
    )
    later = NOW + timedelta(seconds=10)
    (second,) = claim(store, later)
    assert second.attempt == 2
    assert store.release([second], later) == 1
    (row,) = store.history(None)
    assert (row.status, row.attempts, row.error, row.retry_at) == ("retrying", 1, "boom", later)
    assert (row.started_at, row.finished_at, row.worker) == (None, None, None)
    (third,) = claim(store, later)
    assert third.attempt == 2


def test_release_leaves_claims_booked_or_taken_over(store: Store) -> None:
    defer(store, "booked")
    defer(store, "taken")
    defer(store, "kept")
    claims = {c.key: c for c in claim(store)}
    store.book_success([claims["booked"]], NOW)
    (taken_over,) = claim(store, EXPIRED, reclaim=("sync",), owner="host#2", limit=1)
    assert taken_over.key in ("taken", "kept")
    stale = claims[taken_over.key]
    other = claims["kept" if taken_over.key == "taken" else "taken"]
    assert store.release([claims["booked"], stale], EXPIRED) == 0
    assert store.release([], EXPIRED) == 0
    history = {o.key: o for o in store.history(None)}
    assert history["booked"].status == "succeeded"
    assert (history[taken_over.key].status, history[taken_over.key].worker) == (
        "running",
        "host#2",
    )
    assert store.release([other], EXPIRED) == 1


def test_a_released_serial_occurrence_frees_its_schedule(store: Store) -> None:
    defer(store, "s")
    instance = at(NOW + TICK).next_instance_after(NOW)
    assert instance is not None
    store.add_occurrences(None, "s", [Planned(instance, origin="trigger")], now=NOW)
    (first,) = claim(store, NOW + TICK, serial=("sync",))
    assert claim(store, NOW + TICK, serial=("sync",)) == []  # one at a time
    assert store.release([first], NOW + TICK) == 1
    (again,) = claim(store, NOW + TICK, serial=("sync",))
    assert again.scheduled_for == first.scheduled_for  # the oldest first, as before


# --- mark_left_running --------------------------------------------------------------------------


def test_an_attempt_left_running_says_so_and_keeps_its_lease(store: Store) -> None:
    defer(store, "left")
    defer(store, "booked")
    claims = {c.key: c for c in claim(store)}
    store.book_success([claims["booked"]], NOW)
    reason = "worker host#1 stopped with attempt 1 running; its lease is left to expire"
    assert store.mark_left_running([claims["left"], claims["booked"]], reason) == 1
    assert store.mark_left_running([], reason) == 0
    history = {o.key: o for o in store.history(None)}
    left = history["left"]
    assert (left.status, left.attempts, left.worker, left.reason) == (
        "running",
        1,
        "host#1",
        reason,
    )
    assert left.lease_expires_at == claims["left"].lease_expires_at
    assert history["booked"].reason is None
    # The lease runs out on its own, and the next worker takes the occurrence over.
    (taken_over,) = claim(store, EXPIRED, reclaim=("sync",), owner="host#2")
    assert (taken_over.key, taken_over.reclaimed) == ("left", True)
    assert store.mark_left_running([claims["left"]], "stale") == 0  # taken over: not its to mark


# --- abandon_expired ----------------------------------------------------------------------------


def test_an_attempt_whose_lease_was_extended_after_it_was_read_is_not_abandoned(
    store: Store,
) -> None:
    """The sweep reads expired at_most_once attempts, then writes: a worker slow but alive that
    extends its lease in between keeps its attempt (SQLite reads outside the write lock)."""
    defer(store, "c1")
    (held,) = claim(store)
    later = EXPIRED + timedelta(seconds=1)
    original = store.abandon_expired
    if store.dialect == "sqlite":
        write = store._write  # type: ignore[attr-defined]
        extended: list[bool] = []

        def extend_first(*args: object, **kwargs: object) -> object:
            if not extended:
                store._write = write  # type: ignore[attr-defined]
                extended.append(bool(store.extend_leases([(held, later + LEASE)])))
            return write(*args, **kwargs)

        store._write = extend_first  # type: ignore[attr-defined]
        abandoned = original(now=later, jobs=["sync"], reason="lost")
        store._write = write  # type: ignore[attr-defined]
        assert extended == [True]
    else:
        # PostgreSQL reads and writes under the lock
        assert store.extend_leases([(held, later + LEASE)])
        abandoned = original(now=later, jobs=["sync"], reason="lost")
    assert abandoned == []
    (row,) = store.history(None, key="c1")
    assert row.status == "running"


# --- fail_orphaned ------------------------------------------------------------------------------


def test_running_attempts_of_a_job_no_worker_declares_are_failed_not_left_running(
    store: Store,
) -> None:
    defer(store, "gone1", job="gone")
    defer(store, "kept", job="sync")
    (orphan, declared) = claim(store, jobs=("gone", "sync"))
    hour_later = EXPIRED + timedelta(hours=1)
    assert store.fail_orphaned(hour_later, ["sync"], EXPIRED - TICK) == []  # not yet that long
    (failed,) = store.fail_orphaned(hour_later, ["sync"], hour_later - timedelta(minutes=30))
    assert (failed.key, failed.job) == ("gone1", "gone")
    (row,) = store.history(None, key="gone1")
    assert row.status == "failed"
    assert "no running worker declares job gone" in (row.error or "")
    (other,) = store.history(None, key="kept")
    assert other.status == "running"  # its job is declared: reclaim_expired's to handle
    assert {orphan.key, declared.key} == {"gone1", "kept"}
