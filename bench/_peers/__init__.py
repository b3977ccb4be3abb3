"""Support package of ``bench/peers.py`` and ``bench/peer_worker.py``: peers under workloads.

``harness`` holds what is the same for every peer (databases, worker processes, the per-job
record, the burst's figures); each ``<name>_peer`` module holds one peer's set-up, enqueueing
and worker for the burst. ``lag`` and ``idle`` are the peer-neutral halves of
``bench/peer_worker.py``, and each ``<name>_schedules`` module holds one peer's schedules,
one-off jobs and worker for them. The package is named
``_peers`` rather than ``peers`` so that it never shadows the ``peers.py`` entry point.

Every peer module exposes the same interface (``PeerModule``, ``ScheduleModule``).
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


class ScheduleModule(Protocol):
    """What ``lag`` and ``idle`` need from a peer's schedules module.

    Workloads (*modes*): ``recurring`` (``schedules`` keys ``s0..`` firing every second),
    ``oneoff`` (one-off jobs for those keys due at given seconds) and ``idle`` (``schedules``
    hourly schedules, none due before ``start``). Each handler's first act is
    ``started = time.time()``; it then calls ``lag.record(key, due, started)`` once, ``due``
    being the time (Unix seconds) the peer says the run was scheduled for.
    """

    DISTRIBUTIONS: tuple[str, ...]
    #: For each mode the peer can express: what it uses, in one line.
    MODES: dict[str, str]
    SETTINGS: dict[str, Any]
    #: True if a recurring run can only record the due time of its key's next run (see
    #: ``lag.chain_next_due``), not its own.
    RECORDS_NEXT_DUE: bool

    async def install(self, dsn: str) -> None: ...

    async def plan(self, dsn: str, mode: str, schedules: int, slots: Sequence[int]) -> None:
        """Store the workload of ``mode``: schedules first due at ``slots[0]``, or one-off jobs
        due at every second of ``slots``. A peer whose schedules live in code stores nothing
        here; its workers register them."""
        ...

    async def work(self, dsn: str, mode: str, schedules: int, start: int) -> None:
        """Run one worker until killed; ``start`` is the workload's ``slots[0]``."""
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


def load_schedules(name: str) -> ScheduleModule:
    """Import and return the schedules module of peer ``name`` (one of ``PEERS``)."""
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; choose from {', '.join(PEERS)}")
    return cast(ScheduleModule, importlib.import_module(f"_peers.{name}_schedules"))
