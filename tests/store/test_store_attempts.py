"""Store contract, the attempts of an occurrence (`Store.attempts`): the ones the sweep ends
(reclaimed, orphaned) are kept like a booked failure, a pruned occurrence takes its attempts
with it, and no occurrence keeps more than `records.ATTEMPTS_KEPT`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from oncely import at
from oncely.model import Attempt, Claim, Planned
from oncely.store import Store, records

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
EXPIRED = NOW + LEASE
TICK = timedelta(microseconds=1)


def defer(store: Store, key: str, job: str = "sync", when: datetime = NOW) -> None:
    instance = at(when).next_instance_after(when - TICK)
    assert instance is not None
    store.save_schedule(
        tenant=None, key=key, job=job, origin="api", trigger=at(when), payload=None,
        next_run_at=None, now=NOW, occurrences=[Planned(instance, origin="defer")],
    )  # fmt: skip


def claim(store: Store, now: datetime, owner: str, *, job: str = "sync") -> Claim:
    (claimed,) = store.claim_due(
        owner=owner, lease=LEASE, limit=1, now=now, jobs=[job], reclaim=[], serial=[],
    )  # fmt: skip
    return claimed


def attempts(store: Store, key: str, when: datetime = NOW) -> list[Attempt]:
    found = store.attempts(None, key, when)
    assert found is not None
    return found


def kept_rows(store: Store) -> int:
    with store.transaction() as connection:
        row = connection.execute("SELECT count(*) AS n FROM oncely_attempts").fetchone()
    return int(row[0] if isinstance(row, tuple) else row["n"])


def test_a_lost_attempt_the_sweep_reclaims_is_kept(store: Store) -> None:
    defer(store, "d")
    first = claim(store, NOW, "host#1")
    (reclaimed,) = store.reclaim_expired(EXPIRED, {"sync": 3})
    assert reclaimed.status == "retrying"
    assert attempts(store, "d") == [
        Attempt(
            number=1,
            outcome="lost",
            started_at=NOW,
            finished_at=EXPIRED,
            worker="host#1",
            fence=first.fence,
            error="worker host#1 was lost during attempt 1 (lease expired)",
        )
    ]
    second = claim(store, EXPIRED, "host#2")
    assert store.book_success([second], EXPIRED + TICK) == [second]
    lost, done = attempts(store, "d")
    assert lost.outcome == "lost"
    assert (done.number, done.outcome, done.worker, done.fence) == (
        2,
        "succeeded",
        "host#2",
        second.fence,
    )


def test_a_lost_last_attempt_is_the_failed_occurrences_own(store: Store) -> None:
    defer(store, "d")
    first = claim(store, NOW, "host#1")
    store.reclaim_expired(EXPIRED, {"sync": 1})
    (only,) = attempts(store, "d")
    assert (only.number, only.outcome, only.worker, only.fence) == (
        1,
        "failed",
        "host#1",
        first.fence,
    )
    assert "was lost during attempt 1 (lease expired) and that was the last" in (only.error or "")
    assert kept_rows(store) == 0  # the row holds it: nothing written besides


def test_an_orphaned_attempt_failed_by_the_sweep_is_listed(store: Store) -> None:
    defer(store, "gone-job", job="deleted")
    first = claim(store, NOW, "host#1", job="deleted")
    (failed,) = store.fail_orphaned(EXPIRED + LEASE, ["sync"], EXPIRED + LEASE)
    assert failed.key == "gone-job"
    (only,) = attempts(store, "gone-job")
    assert (only.outcome, only.worker, only.fence) == ("failed", "host#1", first.fence)
    assert "no running worker declares job deleted" in (only.error or "")


def test_a_pruned_occurrence_takes_its_attempts_with_it(store: Store) -> None:
    keys = [f"p{n}" for n in range(3)]
    for key in keys:
        defer(store, key)
        claimed = claim(store, NOW, "host#1")
        store.book_failure(claimed, NOW, error="boom", retry_at=NOW, pause_after=None)
        again = claim(store, NOW, "host#1")
        store.book_failure(again, NOW, error="boom", retry_at=None, pause_after=None)
    assert kept_rows(store) == 3
    if store.dialect == "postgres":  # the day goes whole, and its attempts with it
        assert store.prune(NOW + timedelta(days=1), 2) == 3
        assert kept_rows(store) == 0
        return
    assert store.prune(NOW + timedelta(days=1), 2) == 2
    assert kept_rows(store) == 1
    assert store.prune(NOW + timedelta(days=1), 100) == 1
    assert kept_rows(store) == 0


def test_no_more_than_the_kept_attempts_of_one_occurrence(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records, "ATTEMPTS_KEPT", 2)
    defer(store, "d")
    now = NOW
    for _ in range(4):
        claimed = claim(store, now, "host#1")
        store.book_failure(
            claimed, now, error=f"boom {claimed.attempt}", retry_at=now, pause_after=None
        )
        now += TICK
    last = claim(store, now, "host#1")
    assert [(a.number, a.error) for a in attempts(store, "d")] == [
        (1, "boom 1"),
        (2, "boom 2"),
        (5, None),
    ]
    assert last.attempt == 5
