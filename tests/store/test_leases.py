"""Store contract, named leases: one holder at a time, decided by expiry, with increasing tokens."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from oncely.store import Store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=30)
RACER = Path(__file__).with_name("_lease_racer.py")


def test_a_free_lease_is_taken_and_a_held_one_is_not(store: Store) -> None:
    lease = store.acquire_lease("housekeeping", "host#1", TTL, NOW)
    assert lease is not None
    assert (lease.name, lease.owner, lease.expires_at) == ("housekeeping", "host#1", NOW + TTL)
    assert store.acquire_lease("housekeeping", "host#2", TTL, NOW + TTL / 2) is None
    # only expiry decides, never the owner's name: two threads of one process share it
    assert store.acquire_lease("housekeeping", "host#1", TTL, NOW + TTL / 2) is None
    other = store.acquire_lease("app.lock:export", "host#2", TTL, NOW)
    assert other is not None  # names are independent


def test_an_expired_lease_is_taken_over_with_a_greater_token(store: Store) -> None:
    first = store.acquire_lease("housekeeping", "host#1", TTL, NOW)
    assert first is not None
    assert (
        store.acquire_lease("housekeeping", "host#2", TTL, NOW + TTL - timedelta(microseconds=1))
        is None
    )
    second = store.acquire_lease("housekeeping", "host#2", TTL, NOW + TTL)  # expires_at <= now
    assert second is not None
    assert second.owner == "host#2"
    assert second.token > first.token
    assert second.expires_at == NOW + 2 * TTL


def test_renew_only_while_the_token_is_current(store: Store) -> None:
    first = store.acquire_lease("housekeeping", "host#1", TTL, NOW)
    assert first is not None
    renewed = store.renew_lease(first, NOW + 2 * TTL)
    assert renewed == first.__class__("housekeeping", "host#1", first.token, NOW + 2 * TTL)
    # ran out, nobody took it: still the holder's, so it may renew
    assert store.renew_lease(first, NOW + 3 * TTL) is not None
    second = store.acquire_lease("housekeeping", "host#2", TTL, NOW + 3 * TTL)
    assert second is not None
    assert store.renew_lease(first, NOW + 5 * TTL) is None  # taken over: never given back
    assert store.acquire_lease("housekeeping", "host#3", TTL, NOW + 3 * TTL + TTL / 2) is None


def test_release_frees_at_once_and_a_stale_release_frees_nothing(store: Store) -> None:
    first = store.acquire_lease("housekeeping", "host#1", TTL, NOW)
    assert first is not None
    assert store.release_lease(first) is True
    assert store.release_lease(first) is False  # released already
    assert store.renew_lease(first, NOW + TTL) is None  # and not revived
    second = store.acquire_lease("housekeeping", "host#2", TTL, NOW)  # at once, before expiry
    assert second is not None
    assert second.token > first.token
    assert store.release_lease(first) is False  # a stale holder never frees a newer holder
    assert store.acquire_lease("housekeeping", "host#3", TTL, NOW) is None
    third_try = store.acquire_lease("housekeeping", "host#3", TTL, NOW + TTL)
    assert third_try is not None
    assert third_try.token > second.token


def test_tokens_increase_per_name_across_every_acquisition(store: Store) -> None:
    tokens = []
    for n in range(5):
        lease = store.acquire_lease("housekeeping", f"host#{n}", TTL, NOW + n * TTL)
        assert lease is not None
        tokens.append(lease.token)
        if n % 2:
            assert store.release_lease(lease)
    assert tokens == sorted(set(tokens))


def test_a_token_drawn_before_the_holders_still_comes_out_greater(store: Store) -> None:
    # A caller whose token was drawn before the current holder's (its process paused in between)
    # takes over once the lease runs out: its token must still be greater, never a step back.
    for n in range(4):
        store.acquire_lease(f"other-{n}", "host#1", TTL, NOW)
    holder = store.acquire_lease("housekeeping", "host#1", TTL, NOW)
    assert holder is not None
    rewind = (
        "UPDATE oncely_lease_tokens SET value = 0"
        if store.dialect == "sqlite"
        else "ALTER SEQUENCE oncely_lease_tokens RESTART WITH 1"
    )
    with store._connect() as connection:  # type: ignore[attr-defined]
        connection.execute(rewind)
    late = store.acquire_lease("housekeeping", "host#2", TTL, NOW + TTL)
    assert late is not None
    assert late.token > holder.token


def test_racing_processes_never_hold_a_lease_together(store: Store) -> None:
    # 2 processes x 8 threads for 3 s, each taking, holding, releasing or letting run out.
    url = f"sqlite:///{store.path}" if store.dialect == "sqlite" else store.conninfo  # type: ignore[attr-defined]
    start_at = time.time() + 1.5  # both processes imported and connected by then
    racers = [
        subprocess.Popen(
            [sys.executable, str(RACER), url, str(start_at), "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    held = []
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
        held += json.loads(out)
    held.sort(key=lambda h: h["token"])
    tokens = [h["token"] for h in held]
    assert len(set(tokens)) == len(tokens)
    assert len(held) > 20, "too few acquisitions to call it a race"
    assert len({h["owner"].split(".")[0] for h in held}) == 2, "one process never got the lease"
    for before, after in itertools.pairwise(held):
        # in token order, each holder's time with the lease ends before the next one's begins
        assert after["held_from"] >= before["held_until"], (before, after)
