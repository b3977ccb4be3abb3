"""One process of the lease race in test_leases.py: THREADS threads contend for one lease.

Usage: python _lease_racer.py URL START_AT SECONDS. From START_AT (a time.time() value, so that
every process starts together) for SECONDS, each thread tries to take lease "race"; when it gets
it, it holds it a little, then releases it, or now and then lets it run out. Prints one JSON list
of the acquisitions: token, when the holder had it (``held_from``) and until when it could
believe it held it (``held_until``: its release began, or its expiry), all in microseconds.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

from oncely.store import open_store

THREADS = 8
TTL = timedelta(milliseconds=60)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(t: datetime) -> int:
    return (t - EPOCH) // timedelta(microseconds=1)


def main() -> None:
    url, start_at, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    store = open_store(url)
    held: list[dict[str, int | str]] = []
    lock = threading.Lock()

    def race(n: int) -> None:
        owner = f"racer#{os.getpid()}.{n}"
        rng = random.Random(f"{os.getpid()}-{n}")
        time.sleep(max(0.0, start_at - time.time()))
        deadline = start_at + seconds
        while time.time() < deadline:
            lease = store.acquire_lease("race", owner, TTL, datetime.now(UTC))
            held_from = datetime.now(UTC)
            if lease is None:
                time.sleep(rng.uniform(0, 0.002))
                continue
            record: dict[str, int | str] = {"owner": owner, "token": lease.token}
            record["held_from"] = micros(held_from)
            time.sleep(rng.uniform(0, TTL.total_seconds() / 3))
            if rng.random() < 0.8:
                releasing = datetime.now(UTC)
                released = store.release_lease(lease)
                held_until = min(releasing, lease.expires_at) if released else lease.expires_at
            else:
                held_until = lease.expires_at  # let it run out: another takes it over
            record["held_until"] = micros(held_until)
            with lock:
                held.append(record)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    print(json.dumps(held))


if __name__ == "__main__":
    main()
