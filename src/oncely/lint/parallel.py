"""Batches of work shared between this process and a few more, results in the batches' order.

Where forking is safe (Linux, a process with no other thread), the other processes are forked
children that share this one's memory: nothing is sent to them, and they need neither
``multiprocessing`` nor ``concurrent.futures`` (a tenth of a second to import and start). They
take batches from one pipe holding each batch's number, a byte each, so that whichever process
is free takes the next; a read of one byte from a pipe is atomic, so each batch is taken once.
Results come back pickled on another pipe. A batch a child took and did not report (it died)
is done again here: the children are a speed-up, never a source of truth.

Elsewhere a spawned process pool does it, and this process takes the batches no worker has
begun (a queued future can still be cancelled), from the last back.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

Batch = TypeVar("Batch")
Result = TypeVar("Result")

#: Batches are numbered by one byte each.
MAX_BATCHES = 255


def share(
    batches: Sequence[Batch],
    here: Callable[[Batch], Result],
    pooled: Callable[[Batch], Result],
    processes: int,
) -> list[Result]:
    """``here(batch)`` for each batch, in order, done by this process and ``processes - 1``
    more (at most `MAX_BATCHES` batches). A forked child calls ``here`` too; a spawned pool
    worker calls ``pooled``, which must pickle (a module-level function, or a partial of one).
    """
    if len(batches) > MAX_BATCHES:
        raise ValueError(f"at most {MAX_BATCHES} batches, not {len(batches)}")
    if sys.platform == "linux" and threading.active_count() == 1:
        return _forked(batches, here, processes - 1)
    return _pooled(batches, here, pooled, processes - 1)


def _forked(
    batches: Sequence[Batch], here: Callable[[Batch], Result], children: int
) -> list[Result]:
    import pickle

    done: list[tuple[Result] | None] = [None] * len(batches)
    claims, claims_in = os.pipe()
    os.write(claims_in, bytes(range(len(batches))))  # well under a pipe's buffer
    os.close(claims_in)
    results, results_in = os.pipe()
    pids = []
    for _ in range(children):
        pid = os.fork()
        if pid == 0:  # the child: it must end in os._exit, never return into the caller
            status = 1
            try:
                os.close(results)
                with os.fdopen(results_in, "wb") as out:
                    for index in _taken(claims):
                        pickle.dump((index, here(batches[index])), out)
                status = 0
            finally:
                os._exit(status)
        pids.append(pid)
    os.close(results_in)
    try:
        for index in _taken(claims):
            done[index] = (here(batches[index]),)
    finally:
        os.close(claims)
        with os.fdopen(results, "rb") as reported:
            while True:
                try:
                    index, result = pickle.load(reported)
                except EOFError:
                    break
                done[index] = (result,)
        for pid in pids:
            os.waitpid(pid, 0)
    return [
        kept[0] if kept is not None else here(batch)
        for kept, batch in zip(done, batches, strict=True)
    ]


def _taken(claims: int) -> Iterator[int]:
    """The numbers of the batches this process takes, until none is left."""
    while taken := os.read(claims, 1):
        yield taken[0]


def _pooled(
    batches: Sequence[Batch],
    here: Callable[[Batch], Result],
    pooled: Callable[[Batch], Result],
    workers: int,
) -> list[Result]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # A spawned worker re-imports oncely (over half a second), but forking is only safe on
    # Linux in a process with no other threads: elsewhere a lock held by another thread, or
    # macOS's frameworks, can hang the child.
    context = multiprocessing.get_context("spawn")
    done: list[tuple[Result] | None] = [None] * len(batches)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(pooled, batch) for batch in batches]
        for index in reversed(range(len(batches))):
            if not futures[index].cancel():
                break
            done[index] = (here(batches[index]),)
        return [
            kept[0] if kept is not None else future.result()
            for kept, future in zip(done, futures, strict=True)
        ]
