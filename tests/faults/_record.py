"""The independent record the worker apps' handlers keep, never read by oncely: one line per
run, ``job key scheduled_for pid ran_at attempt [note]``, appended with one O_APPEND write (atomic
for a short line) to ``$ONCELY_TEST_EFFECTS/<pid>.txt``."""

from __future__ import annotations

import os
import time

import oncely

EFFECTS = os.environ.get("ONCELY_TEST_EFFECTS", ".")


def record(run: oncely.Run, note: str = "") -> None:
    line = (
        f"{run.job} {run.key} {run.scheduled_for.isoformat()} {os.getpid()} {time.time():.3f} "
        f"{run.attempt}{' ' + note if note else ''}\n"
    )
    fd = os.open(f"{EFFECTS}/{os.getpid()}.txt", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
