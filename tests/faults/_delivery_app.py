"""The app the fault scenarios run as `oncely run _delivery_app:app` processes.

One job per delivery mode, named after it, each scheduled by the test at run time, and `fenced`,
whose handler writes downstream under its fencing token. Every handler leaves an independent
record of its run, never read by oncely: ``transactional`` a row in ``fault_effects`` in its own
transaction (committed with the completion, or not at all), the others a line (_record.py).

Environment: ONCELY_DATABASE_URL; ONCELY_TEST_EFFECTS (a directory); ONCELY_TEST_LEASE_S
(default 4); ONCELY_TEST_MISFIRE (default skip); ONCELY_TEST_SLEEP_S, how long each handler
works after making its effect (default 0), so that a kill can find it mid-call with its effect
made; ONCELY_TEST_SKEW_S, seconds this machine's clock is ahead of the real one (negative:
behind; default 0), played by replacing `oncely.clock.wall`, the machine clock that the default
clock corrects by the database's.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta

import psycopg
from _record import record

import oncely
import oncely.clock

URL = os.environ["ONCELY_DATABASE_URL"]
LEASE = timedelta(seconds=float(os.environ.get("ONCELY_TEST_LEASE_S", "4")))
MISFIRE = os.environ.get("ONCELY_TEST_MISFIRE", "skip")
SLEEP_S = float(os.environ.get("ONCELY_TEST_SLEEP_S", "0"))
SKEW = timedelta(seconds=float(os.environ.get("ONCELY_TEST_SKEW_S", "0")))


def _skewed_wall() -> datetime:
    return datetime.now(UTC) + SKEW


oncely.clock.wall = _skewed_wall
app = oncely.App(URL)


# overlap="allow": under "skip", an occurrence held by a killed worker until its lease expires
# would make its schedule's next ones skip (recorded, not run); these jobs' tests count runs.
OPTIONS = {"lease": LEASE, "overlap": "allow", "retries": 50, "misfire": MISFIRE}


@app.job(delivery="transactional", **OPTIONS)
def transactional(run: oncely.Run) -> None:
    run.connection.execute(
        "INSERT INTO fault_effects (job, key, scheduled_for, pid, ran_at) "
        "VALUES (%s, %s, %s, %s, %s)",
        (run.job, run.key, run.scheduled_for, os.getpid(), time.time()),
    )
    time.sleep(SLEEP_S)


@app.job(delivery="at_most_once", **OPTIONS)
def at_most_once(run: oncely.Run) -> None:
    record(run)
    time.sleep(SLEEP_S)


@app.job(delivery="at_least_once", **OPTIONS)
def at_least_once(run: oncely.Run) -> None:
    record(run, "" if run.payload is None else f"payload={len(json.dumps(run.payload))}")
    time.sleep(SLEEP_S)


@app.job(**OPTIONS)
def fenced(run: oncely.Run) -> None:
    """Records its start, works, then writes downstream only if no newer attempt wrote first."""
    record(run, "started")
    time.sleep(float(run.payload["work_s"]))
    lost = run.lease_lost
    with psycopg.connect(URL, autocommit=True) as connection:
        applied = connection.execute(
            "UPDATE fault_downstream SET last_token = %s, writer = %s "
            "WHERE name = %s AND last_token < %s",
            (run.fence, os.getpid(), run.key, run.fence),
        ).rowcount
    record(run, f"wrote fence={run.fence} applied={applied} lease_lost={lost}")
