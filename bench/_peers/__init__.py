"""Support package of ``bench/peers.py`` and ``bench/peer_lag.py``: workloads run through peers.

``harness`` holds what is the same for every peer (databases, worker processes, the per-job
record, the burst's figures); each ``<name>_peer`` module holds one peer's set-up, enqueueing
and worker for the burst. ``lag`` is the lag benchmark's peer-neutral half and each
``<name>_lag`` module one peer's schedules, one-off jobs and worker for it. The package is named
``_peers`` rather than ``peers`` so that it never shadows the ``peers.py`` entry point.

Every peer module exposes the same interface (``PeerModule``, ``LagModule``).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Sequence
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


class LagModule(Protocol):
    """What ``lag`` needs from a peer's lag module.

    Each handler's first act is ``started = time.time()``; it then calls
    ``lag.record(key, due, started)`` once, ``due`` being the time (Unix seconds) the peer says
    the run was scheduled for.
    """

    DISTRIBUTIONS: tuple[str, ...]
    #: For each mode the peer can express ("recurring", "oneoff"): what it uses, in one line.
    MODES: dict[str, str]
    SETTINGS: dict[str, Any]
    #: True if a recurring run can only record the due time of its key's next run (see
    #: ``lag.chain_next_due``), not its own.
    RECORDS_NEXT_DUE: bool

    async def install(self, dsn: str) -> None: ...

    async def plan(self, dsn: str, mode: str, schedules: int, slots: Sequence[int]) -> None:
        """Store the workload: recurring schedules keyed ``s0..`` starting at ``slots[0]``
        (nothing, for a peer whose schedules live in code), or one-off jobs ``s0..`` due at
        every second of ``slots``."""
        ...

    async def work(self, dsn: str, mode: str, schedules: int) -> None: ...


#: oncely itself, measured through the same harness by ``bench/engine.py``.
SUBJECT = "oncely"


def load(name: str) -> PeerModule:
    """Import and return the module of peer ``name`` (one of ``PEERS``, or ``SUBJECT``)."""
    if name == SUBJECT:
        return cast(PeerModule, importlib.import_module("_peers.oncely_subject"))
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; choose from {', '.join(PEERS)}")
    return cast(PeerModule, importlib.import_module(f"_peers.{name}_peer"))


def load_lag(name: str) -> LagModule:
    """Import and return the lag module of peer ``name`` (one of ``PEERS``)."""
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; choose from {', '.join(PEERS)}")
    return cast(LagModule, importlib.import_module(f"_peers.{name}_lag"))
