"""Support package of ``bench/peers.py``: the burst workload run through peer job queues.

``harness`` holds what is the same for every peer (databases, worker processes, the per-job
record, the figures); each ``<name>_peer`` module holds one peer's set-up, enqueueing and worker.
It is named ``_peers`` rather than ``peers`` so that it never shadows the ``peers.py`` entry point.

Every peer module exposes the same interface (see ``PeerModule``).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable
from typing import Any, Protocol, cast

#: Peers in the order they are run and reported.
PEERS: tuple[str, ...] = ("procrastinate", "pgqueuer", "apscheduler")


class PeerModule(Protocol):
    """What ``harness`` needs from a peer module.

    ``install`` and ``enqueue`` are coroutines taking the peer database's libpq DSN (oncely's:
    its database URL); ``work`` runs until its process is sent SIGTERM, calling
    ``harness.record(n)`` for every job run. It is a coroutine for the peers, a plain function
    for oncely, whose worker is synchronous.
    """

    #: Distribution names whose installed versions are reported.
    DISTRIBUTIONS: tuple[str, ...]
    #: The settings chosen for this peer and why, reported in the JSON document.
    SETTINGS: dict[str, Any]

    async def install(self, dsn: str) -> None: ...

    async def enqueue(self, dsn: str, jobs: int) -> None: ...

    def work(self, dsn: str) -> Awaitable[None] | None: ...

    def unfinished(self, dsn: str) -> int:
        """Jobs the peer's own tables still hold as not finished."""
        ...


#: oncely itself, measured through the same harness by ``bench/engine.py``.
SUBJECT = "oncely"


def load(name: str) -> PeerModule:
    """Import and return the module of peer ``name`` (one of ``PEERS``, or ``SUBJECT``)."""
    if name == SUBJECT:
        return cast(PeerModule, importlib.import_module("_peers.oncely_subject"))
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; choose from {', '.join(PEERS)}")
    return cast(PeerModule, importlib.import_module(f"_peers.{name}_peer"))
