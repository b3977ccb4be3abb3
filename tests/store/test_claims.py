"""Store contract, claims: who may run what, under which lease and fence, booked once."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta

from oncely import at
from oncely.model import Claim, Planned
from oncely.store import Store, open_store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)


def defer(store: Store, key: str, when: datetime = NOW, job: str = "sync") -> None:
    instance = at(when).next_instance_after(when - timedelta(microseconds=1))
    assert instance is not None
    store.save_schedule(
        tenant=None,
        key=key,
        job=job,
        origin="api",
        trigger=at(when),
        payload={"k": key},
        next_run_at=None,
        now=NOW,
        occurrences=[Planned(instance, origin="defer")],
    )


def claim(
    store: Store,
    now: datetime = NOW,
    *,
    limit: int = 10,
    owner: str = "host#1",
    serial: tuple[str, ...] = (),
    reclaim: tuple[str, ...] = ("sync",),
) -> list[Claim]:
    return store.claim_due(
        owner=owner,
        lease=LEASE,
        limit=limit,
        now=now,
        jobs=["sync"],
        reclaim=reclaim,
        serial=serial,
    )


def test_a_claim_takes_what_is_due_under_a_lease(store: Store) -> None:
    defer(store, "due")
    defer(store, "later", NOW + timedelta(minutes=1))
    (taken,) = claim(store)
    assert (taken.key, taken.attempt, taken.fence, taken.owner) == ("due", 1, 1, "host#1")
    assert taken.lease_expires_at == NOW + LEASE
    assert taken.payload == {"k": "due"}
    assert claim(store) == []  # running under a live lease: nobody else takes it


def test_only_known_jobs_are_claimed(store: Store) -> None:
    defer(store, "other", job="not_in_this_app")
    assert claim(store) == []


def test_an_expired_lease_is_claimable_again_with_a_greater_fence(store: Store) -> None:
    defer(store, "d")
    (first,) = claim(store)
    assert claim(store, NOW + LEASE - timedelta(microseconds=1)) == []
    (second,) = claim(store, NOW + LEASE, owner="host#2")
    assert (second.attempt, second.fence, second.reclaimed) == (2, first.fence + 1, True)
    assert store.book_success([first], NOW + LEASE) == []  # the lost worker books nothing
    assert store.extend_leases([(first, NOW + 2 * LEASE)]) == set()
    assert store.book_success([second], NOW + LEASE) == [second]


def test_an_expired_lease_of_a_job_that_must_not_rerun_is_not_reclaimed(store: Store) -> None:
    defer(store, "d")
    claim(store, reclaim=())
    assert claim(store, NOW + 2 * LEASE, reclaim=()) == []
    lost = store.abandon_expired(now=NOW + 2 * LEASE, jobs=["sync"], reason="lost")
    assert [(a.key, a.owner, a.attempts) for a in lost] == [("d", "host#1", 1)]
    assert store.history(None)[0].status == "abandoned"


def test_a_serial_job_runs_one_occurrence_of_a_schedule_at_a_time(store: Store) -> None:
    defer(store, "s")
    trigger_now = Planned(
        at(NOW + timedelta(seconds=1)).next_instance_after(NOW),  # type: ignore[arg-type]
        origin="trigger",
    )
    store.add_occurrences(None, "s", [trigger_now], now=NOW)
    later = NOW + timedelta(seconds=2)
    (first,) = claim(store, later, serial=("sync",))
    assert claim(store, later, serial=("sync",)) == []
    store.book_success([first], later)
    (second,) = claim(store, later, serial=("sync",))
    assert second.fence == first.fence + 1


def test_claimers_racing_take_each_occurrence_once(store: Store) -> None:
    for n in range(60):
        defer(store, f"d{n}")
    url = f"sqlite:///{store.path}" if store.dialect == "sqlite" else store.conninfo  # type: ignore[attr-defined]
    racers = [open_store(url) for _ in range(4)]
    barrier = threading.Barrier(len(racers))
    taken: list[str] = []
    lock = threading.Lock()

    def race(other: Store, n: int) -> None:
        barrier.wait()
        while claims := claim(other, limit=3, owner=f"host#{n}"):
            with lock:
                taken.extend(c.key for c in claims)

    threads = [threading.Thread(target=race, args=(s, n)) for n, s in enumerate(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for racer in racers:
        racer.close()
    assert sorted(taken) == sorted(f"d{n}" for n in range(60))


def test_a_retry_waits_for_its_time(store: Store) -> None:
    defer(store, "r")
    (first,) = claim(store)
    retry_at = NOW + timedelta(seconds=30)
    booked = store.book_failure(first, NOW, error="boom", retry_at=retry_at, pause_after=None)
    assert (booked.booked, booked.final) == (True, False)
    assert claim(store, retry_at - timedelta(microseconds=1)) == []
    (second,) = claim(store, retry_at)
    assert second.attempt == 2
    (row,) = store.history(None)
    assert (row.status, row.error, row.retry_at) == ("running", "boom", None)
    assert store.next_due_at() is None  # nothing waits: the one occurrence runs


def connection_identity(store: Store) -> int:
    """Which connection the store hands this process: a PostgreSQL backend, or a SQLite handle."""
    with store._connect() as connection:  # type: ignore[attr-defined]
        if store.dialect == "postgres":
            return int(connection.info.backend_pid)
        return id(connection)


def test_a_forked_child_opens_its_own_connections(store: Store) -> None:
    # gunicorn --preload forks after the app is loaded: a child that used its parent's socket or
    # SQLite handle would interleave with the parent's statements.
    defer(store, "before-fork")
    (claimed,) = claim(store)
    parent = connection_identity(store)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe and exits
        try:
            booked = store.book_success([claimed], NOW) == [claimed]
            os.write(write, f"{booked} {connection_identity(store)}".encode())
        except BaseException as exc:  # anything at all: the parent reports it
            os.write(write, repr(exc).encode()[:200])
        finally:
            os._exit(0)
    os.close(write)
    report = os.read(read, 200).decode()
    os.waitpid(child, 0)
    booked, identity = report.split()
    assert booked == "True", report
    assert int(identity) != parent
    assert store.history(None)[0].status == "succeeded"  # the parent's connection still works


def test_every_held_lease_is_extended_in_one_call_and_a_lost_one_is_left_out(
    store: Store,
) -> None:
    for key in ("a", "b", "c"):
        defer(store, key)
    held = claim(store)
    (taken,) = claim(store, NOW + LEASE, owner="host#2", limit=1)  # one lease ran out
    (lost,) = [h for h in held if h.occurrence_id == taken.occurrence_id]
    first, second = [h for h in held if h is not lost]
    later = NOW + LEASE + timedelta(seconds=1)
    leases = [(first, later), (lost, later), (second, later + timedelta(seconds=10))]
    assert store.extend_leases(leases) == {first.occurrence_id, second.occurrence_id}
    assert store.extend_leases([]) == set()
    # Each lease moved to its own time; the one taken over stays its new holder's.
    (again,) = claim(store, later + timedelta(seconds=5), owner="host#3")
    assert again.occurrence_id == first.occurrence_id
    running = {o.key: o.worker for o in store.history(None, status="running")}
    assert running == {first.key: "host#3", lost.key: "host#2", second.key: "host#1"}
