"""A worker process for the engine tests: ticks until nothing is left, recording each run.

Usage: python _drain_worker.py URL RECORD_FILE. The app's jobs mirror the ones the test defines.
Each run appends one line to RECORD_FILE with O_APPEND (atomic for short lines across processes).
"""

from __future__ import annotations

import os
import sys
import time

import oncely

url, record = sys.argv[1], sys.argv[2]
app = oncely.App(url)
fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT)


@app.job(overlap="allow")
def burst(run: oncely.Run) -> None:
    time.sleep(0.005)  # long enough that one process cannot drain the burst before the other starts
    os.write(fd, f"{run.idempotency_key} {os.getpid()}\n".encode())


idle = 0
while idle < 3:
    report = app.tick()
    idle = idle + 1 if report.ran == 0 else 0
    if report.ran == 0:
        time.sleep(0.05)
app.close()
