"""The app `oncely run _options_app:app` serves in the tests of `oncely run`'s options.

Environment (set by the tests): ONCELY_DATABASE_URL; ONCELY_TEST_EVENTS, a file each `block`
handler appends ``start KEY`` and ``end KEY`` lines to; ONCELY_TEST_RELEASE, a file whose
existence lets every `block` handler return.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import oncely

app = oncely.App()
EVENTS = os.environ.get("ONCELY_TEST_EVENTS")
RELEASE = os.environ.get("ONCELY_TEST_RELEASE")


def _event(line: str) -> None:
    assert EVENTS is not None
    fd = os.open(EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())  # one write per line: whole lines, in order
    finally:
        os.close(fd)


@app.job(overlap="allow")
def block(run: oncely.Run) -> None:
    _event(f"start {run.key}")
    assert RELEASE is not None
    while not Path(RELEASE).exists():
        time.sleep(0.02)
    _event(f"end {run.key}")


@app.job(retries=1)
def fail(run: oncely.Run) -> None:
    raise RuntimeError("upstream answered 503")


@app.job()
def note(run: oncely.Run) -> None:
    pass
