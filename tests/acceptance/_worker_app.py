"""The app the acceptance tests run as real `oncely run _worker_app:app` processes.

Environment (set by the tests): ONCELY_DATABASE_URL; ONCELY_TEST_DELIVERY for the every-second
job `beat` (``at_least_once`` appends to the file ONCELY_TEST_EFFECTS, ``transactional`` inserts
into the table ``effects`` in the handler's transaction); ONCELY_TEST_SLEEP, seconds the one-off
job `slow` sleeps (creating the file ONCELY_TEST_STARTED first); ONCELY_TEST_BEAT=1 schedules
`beat` every second.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import oncely

app = oncely.App()
DELIVERY = os.environ.get("ONCELY_TEST_DELIVERY", "at_least_once")
EFFECTS = os.environ.get("ONCELY_TEST_EFFECTS")
SLEEP_S = float(os.environ.get("ONCELY_TEST_SLEEP", "0"))
BEAT = os.environ.get("ONCELY_TEST_BEAT") == "1"
STARTED = os.environ.get("ONCELY_TEST_STARTED")


# overlap="allow": under the default "skip", an occurrence held by a killed worker until its
# lease expires would make the next ones skip (recorded, but not run), and this job's test is
# that no occurrence goes unrun.
@app.job(
    oncely.every(seconds=1) if BEAT else None,
    delivery=DELIVERY,  # type: ignore[arg-type]
    lease=timedelta(seconds=4),
    overlap="allow",
    retries=50,
)
def beat(run: oncely.Run) -> None:
    if DELIVERY == "transactional":
        run.connection.execute(
            "INSERT INTO effects (scheduled_for, pid) VALUES (%s, %s)",
            (run.scheduled_for, os.getpid()),
        )
        return
    assert EFFECTS is not None
    fd = os.open(EFFECTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{run.scheduled_for.isoformat()} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


@app.job(lease=timedelta(seconds=30))
def slow(run: oncely.Run) -> None:
    if STARTED is not None:
        open(STARTED, "a").close()
    time.sleep(SLEEP_S)
