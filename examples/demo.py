"""oncely's demo: one small app, two worker processes side by side, one run per occurrence.

``make demo`` runs it. It works in ``.demo/`` with the embedded default store (``oncely.db``,
SQLite), defers a batch of reminders, starts two copies of the worker at the same moment, and
prints the history: every occurrence, which process ran it, and the count of duplicates (0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import oncely

HERE = Path(__file__).resolve().parent
WORKDIR = HERE.parent / ".demo"
RUNS = "runs.log"  # one line per handler call, appended by both workers

app = oncely.App()  # $ONCELY_DATABASE_URL, else sqlite:///oncely.db in the working directory


def record(run: oncely.Run) -> None:
    with open(RUNS, "a") as out:
        out.write(f"{run.idempotency_key} {os.getpid()}\n")


@app.job(oncely.every(seconds=2))
def heartbeat(run: oncely.Run) -> None:
    record(run)


@app.job()
def remind(run: oncely.Run) -> None:
    time.sleep(0.05)  # a little work, so both workers get a share
    record(run)


@app.job()
def charge(run: oncely.Run) -> None:
    record(run)
    raise oncely.Terminal(f"card of {run.payload['customer']} declined; not retried")


def worker(seconds: float) -> None:
    """The real worker loop, `app.run_worker()` (what ``oncely run demo:app`` runs), stopped
    after ``seconds`` by SIGTERM, as a deploy stops it: it drains, then returns."""
    threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGTERM)).start()
    app.run_worker(concurrency=4)
    app.close()


def main() -> None:
    WORKDIR.mkdir(exist_ok=True)
    os.chdir(WORKDIR)
    for stale in ("oncely.db", "oncely.db-wal", "oncely.db-shm", RUNS):
        Path(stale).unlink(missing_ok=True)
    now = datetime.now(UTC)
    for n in range(20):
        app.defer(remind, at=now + timedelta(seconds=n * 0.3), key=f"remind:{n}", payload={"n": n})
    app.defer(charge, at=now + timedelta(seconds=1), key="charge:7", payload={"customer": 7})
    print(f"store: {app.url} in {WORKDIR}; two workers for 8 seconds...\n", flush=True)
    workers = [
        subprocess.Popen([sys.executable, __file__, "worker", "8"], cwd=WORKDIR) for _ in range(2)
    ]
    for process in workers:
        process.wait()
    print_history()


def print_history() -> None:
    history = sorted(app.history(limit=1000), key=lambda o: (o.scheduled_for, o.key))
    print(f"{'scheduled for (UTC)':<24} {'key':<12} {'status':<10} {'tries':>5}  worker / why")
    for o in history:
        detail = o.worker or ""
        if o.status != "succeeded":
            detail = (o.reason or o.error or "").strip().splitlines()[-1][:60]
        when = o.scheduled_for.strftime("%H:%M:%S.%f")[:-3]
        print(f"{when:<24} {o.key:<12} {o.status:<10} {o.attempts:>5}  {detail}")
    calls = Counter(line.split()[0] for line in Path(RUNS).read_text().splitlines())
    by_worker = Counter(line.split()[1] for line in Path(RUNS).read_text().splitlines())
    duplicates = sum(n - 1 for n in calls.values())
    shares = ", ".join(f"pid {pid} ran {n}" for pid, n in sorted(by_worker.items()))
    print(
        f"\n{len(history)} occurrences, {sum(calls.values())} handler calls ({shares}); "
        f"occurrences run more than once: {duplicates}"
    )
    app.close()
    if duplicates:
        raise SystemExit("an occurrence ran twice")


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(float(sys.argv[2]))
    else:
        main()
