"""A worker process that dies in the middle of its handler (the engine tests' crash).

Usage: python _crash_worker.py URL DELIVERY MARKER_FILE. The handler writes what it was given to
MARKER_FILE, then the process exits at once: no exception, no booking, no cleanup.
"""

from __future__ import annotations

import os
import sys

import oncely

url, delivery, marker = sys.argv[1], sys.argv[2], sys.argv[3]
app = oncely.App(url)


@app.job(delivery=delivery)  # type: ignore[call-overload]
def fragile(run: oncely.Run) -> None:
    with open(marker, "w") as out:
        out.write(f"{run.idempotency_key} {run.attempt} {run.fence}\n")
    os._exit(3)


app.tick()
raise SystemExit("the handler should have killed the process")
