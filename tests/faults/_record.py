"""The independent record the worker apps' handlers keep, never read by oncely: one line per
run, ``job key scheduled_for pid ran_at attempt [note]`` (the key percent-encoded: keys may hold
spaces), appended with one O_APPEND write (atomic for a short line) to
``$ONCELY_TEST_EFFECTS/<pid>.txt``."""

from __future__ import annotations

import os
import time
from urllib.parse import quote

import oncely

EFFECTS = os.environ.get("ONCELY_TEST_EFFECTS", ".")


def record(run: oncely.Run, note: str = "") -> None:
    fields = [run.job, quote(run.key, safe=""), run.scheduled_for.isoformat(), str(os.getpid())]
    fields += [f"{time.time():.3f}", str(run.attempt), *([note] if note else [])]
    line = " ".join(fields) + "\n"
    fd = os.open(f"{EFFECTS}/{os.getpid()}.txt", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
