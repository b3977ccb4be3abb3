"""One benchmark worker process, started by ``harness.start_workers`` (cwd ``bench``)::

    python -m _peers.worker PEER DSN RECORD_FILE                    # the burst
    python -m _peers.worker PEER DSN RECORD_FILE MODE SCHEDULES START   # see ``ScheduleModule``

It imports the peer's library, opens its record file, prints ``ready`` and waits for ``go`` on
stdin, so that interpreter start-up and imports stay outside what is timed. After ``go`` it
runs the peer's worker until it is sent SIGTERM: a peer that installs no handler exits at once
(Python's default action); oncely's worker drains and returns.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import sys

from _peers import harness, load, load_schedules


def main(argv: list[str]) -> int:
    """Run one worker of peer ``argv[0]`` on database ``argv[1]``, recording to ``argv[2]``."""
    peer_name, dsn, record_path, *workload = argv
    if workload:
        mode, schedules, start = workload
        work = load_schedules(peer_name).work
        launch = functools.partial(work, dsn, mode, int(schedules), int(start))
    else:
        launch = functools.partial(load(peer_name).work, dsn)
    harness.open_record(record_path)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    if sys.stdin.readline().strip() != "go":
        return 1
    # From here on stdout goes to stderr's file: nobody reads the pipe, which could fill up.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    running = launch()
    if inspect.iscoroutine(running):
        asyncio.run(running)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
