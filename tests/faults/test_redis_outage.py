"""Redis outage for the Redis lock provider: instances contend for one lock in a loop while
their connections to Redis are cut, then let through again.

Redis is shared with the rest of the suite, so it is never stopped: each instance reaches it
through a TCP proxy on loopback that the test cuts (tests/_proxy.py). Required: fail closed --
while Redis cannot be reached, the guarded function never starts and each call made then raises
`oncely.LockUnavailable` (it does not return None as if the lock were merely held; a call whose
function was running when Redis went returns its value, its failed release logged); no two
instances are ever inside at once, and tokens only grow; once Redis is back, the lock is taken
again within ``at_most`` (a holder cut off mid-run could not release it: it expires).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis
from _faults import scaled

import oncely
from _proxy import proxied
from oncely.errors import LockUnavailable

INSTANCES = int(scaled(2, 4))
STEADY_S = scaled(2.0, 10.0)
OUTAGE_S = scaled(2.0, 15.0)
AT_MOST = timedelta(seconds=2)
WORK_S = 0.05
OWN_DB = 14


@dataclass
class _Tally:
    """What every instance's calls did, shared under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    inside: int = 0
    overlaps: int = 0
    runs: list[tuple[float, int]] = field(default_factory=list)  # (monotonic start, token)
    outcomes: list[tuple[float, str]] = field(default_factory=list)  # (monotonic, outcome)
    errors: list[BaseException] = field(default_factory=list)


def _instance(url: str, name: str, sqlite_url: str, tally: _Tally, until: float) -> None:
    app = oncely.App(sqlite_url)
    lock = app.lock(name, at_most=AT_MOST, provider=oncely.locks.redis(url, timeout=0.5))

    @lock
    def guarded() -> str:
        with tally.lock:
            tally.inside += 1
            tally.overlaps += tally.inside > 1
            tally.runs.append((time.monotonic(), lock.token or 0))  # 0: run without the lock
        time.sleep(WORK_S)
        with tally.lock:
            tally.inside -= 1
        return "ran"

    try:
        while time.monotonic() < until:
            try:
                outcome = guarded() or "held elsewhere"
            except LockUnavailable:
                outcome = "refused"
            with tally.lock:
                tally.outcomes.append((time.monotonic(), outcome))
            time.sleep(0.02)
    except BaseException as exc:
        tally.errors.append(exc)
    finally:
        app.close()


def test_the_redis_lock_fails_closed_through_an_outage_and_recovers(
    redis_url: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    # Not the fixture's db: every test session on this server flushes that one around each
    # of its Redis tests, and a flush mid-run frees the lock under its holder. A name of its own
    # in another db, deleted afterwards, is touched by nobody else.
    own = urlunsplit(urlsplit(redis_url)._replace(path=f"/{OWN_DB}", query=""))
    name = f"fault-{uuid.uuid4().hex[:8]}"
    tally = _Tally()
    until = time.monotonic() + 2 * STEADY_S + OUTAGE_S
    with proxied(own) as (proxy, through):
        threads = [
            threading.Thread(
                target=_instance,
                args=(through, name, f"sqlite:///{tmp_path / f'app-{n}.db'}", tally, until),
            )
            for n in range(INSTANCES)
        ]
        try:
            for thread in threads:
                thread.start()
            time.sleep(STEADY_S)
            proxy.cut()
            cut_at = time.monotonic()
            time.sleep(OUTAGE_S)
            proxy.restore()
            restored_at = time.monotonic()
            for thread in threads:
                thread.join()
        finally:
            with redis.Redis.from_url(own) as client:
                client.delete(*client.keys(f"*{name}*"))
    assert tally.errors == []
    phases = {
        "before": lambda t: t < cut_at,
        "during": lambda t: cut_at <= t < restored_at,
        "after": lambda t: t >= restored_at,
    }
    counts = {
        name: Counter(outcome for t, outcome in tally.outcomes if inside(t))
        for name, inside in phases.items()
    }
    first_after = min((t for t, _ in tally.runs if t >= restored_at), default=None)
    tokens = [token for _, token in sorted(tally.runs)]
    unheld = sum(1 for _, token in tally.runs if token == 0)
    during = sum(1 for t, _ in tally.runs if phases["during"](t))
    recovered = "never" if first_after is None else f"{first_after - restored_at:.1f} s"
    report(
        f"{INSTANCES} instances, {OUTAGE_S:.0f} s outage: "
        + "; ".join(
            f"{name} " + ", ".join(f"{n} {what}" for what, n in sorted(counted.items()))
            for name, counted in counts.items()
        )
    )
    report(
        f"{during} runs started during the outage, {unheld} without the lock, {tally.overlaps} "
        f"overlaps, tokens "
        f"{'increasing' if tokens == sorted(set(tokens)) else 'NOT increasing'}; the lock was "
        f"taken again {recovered} after Redis came back"
    )
    assert counts["before"]["ran"] > 0
    assert (during, unheld) == (0, 0)
    assert counts["during"]["refused"] > 0
    # A call whose function started before the cut and ended during it ran: its release fails
    # and is logged, and the call returns what the function did (it used to raise
    # LockUnavailable, "did not run", after the function had run). None started during it.
    assert set(counts["during"]) <= {"refused", "ran"}
    assert tally.overlaps == 0
    assert tokens == sorted(set(tokens))
    assert first_after is not None
    assert first_after - restored_at < AT_MOST.total_seconds() + 1.0
