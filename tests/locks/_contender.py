"""One process of the mutual-exclusion test: 8 threads take the lock over and over.

Usage: python _contender.py KIND APP_URL REDIS_URL|- SECONDS COUNTER_FILE LOG_FILE. Under the
lock each thread reads the counter file, yields, writes it plus one, and appends
"<token> <start> <end>" to the log (one O_APPEND write, atomic for a short line).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from datetime import timedelta

import oncely

kind, url, redis_url, seconds, counter, log_path = sys.argv[1:7]
app = oncely.App(url)
provider = oncely.locks.redis(redis_url) if redis_url != "-" else None
lock = app.lock(
    "contended", at_most=timedelta(seconds=5), provider=provider, blocking=True, timeout=10
)
log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
deadline = time.monotonic() + float(seconds)


def contend() -> None:
    while time.monotonic() < deadline:
        with lock:
            start = time.time()
            with open(counter) as f:
                value = int(f.read() or 0)
            time.sleep(0)
            with open(counter, "w") as f:
                f.write(str(value + 1))
            end = time.time()
            os.write(log_fd, f"{lock.token} {start:.6f} {end:.6f}\n".encode())


threads = [threading.Thread(target=contend) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
app.close()
