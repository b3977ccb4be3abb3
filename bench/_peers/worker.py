"""One benchmark worker process: ``python -m _peers.worker PEER DSN RECORD_FILE`` (cwd ``bench``).

It imports the peer's library, opens its record file, prints ``ready`` and waits for ``go`` on
stdin, so that interpreter start-up and imports stay outside the timed drain. After ``go`` it
runs the peer's worker until it is sent SIGTERM: a peer that installs no handler exits at once
(Python's default action); oncely's worker drains and returns.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys

from _peers import harness, load


def main(argv: list[str]) -> int:
    """Run one worker of peer ``argv[0]`` on database ``argv[1]``, recording to ``argv[2]``."""
    peer_name, dsn, record_path = argv
    peer = load(peer_name)
    harness.open_record(record_path)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    if sys.stdin.readline().strip() != "go":
        return 1
    # From here on stdout goes to stderr's file: nobody reads the pipe, which could fill up.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    running = peer.work(dsn)
    if inspect.iscoroutine(running):
        asyncio.run(running)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
