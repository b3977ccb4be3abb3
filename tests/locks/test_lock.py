"""`app.lock` on every provider: exclusion, skipping, expiry, at_least, tokens, stale holders."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _lock_support import Provided

import oncely
from oncely.errors import ConfigurationError, LockHeld
from oncely.locks import LockProvider
from oncely.model import Lease

HERE = Path(__file__).resolve().parent
SECOND = timedelta(seconds=1)


def _lock(
    provided: Provided, app: oncely.App, name: str = "export", **options: object
) -> oncely.locks.Lock:
    options.setdefault("at_most", 10 * SECOND)
    return app.lock(name, provider=provided.provider(app), **options)  # type: ignore[arg-type]


def test_one_holder_at_a_time_and_the_other_is_told_who(provided: Provided) -> None:
    one, two = provided.app(), provided.app()
    first, second = _lock(provided, one), _lock(provided, two)
    with first:
        assert first.token is not None
        with pytest.raises(LockHeld) as held:
            second.acquire()
        assert "#" in str(held.value.holder)  # hostname#pid
    with second:
        assert second.token is not None
        assert second.token > 0
    one.close(), two.close()


def test_the_decorator_skips_while_held_and_runs_when_free(
    provided: Provided, caplog: pytest.LogCaptureFixture
) -> None:
    app = provided.app()
    lock = _lock(provided, app)
    calls: list[str] = []

    @lock
    def export(what: str) -> str:
        calls.append(what)
        return what.upper()

    assert export("a") == "A"
    with caplog.at_level(logging.INFO, logger="oncely"), _lock(provided, provided.app()):
        assert export("b") is None
    assert "skipped: lock 'export' is held by" in caplog.text
    assert export("c") == "C"
    assert calls == ["a", "c"]
    app.close()


def test_async_functions_are_guarded_too(provided: Provided) -> None:
    app = provided.app()
    lock = _lock(provided, app)
    tokens: list[int | None] = []

    @lock
    async def export() -> str:
        tokens.append(lock.token)
        await asyncio.sleep(0)
        return "done"

    assert asyncio.run(export()) == "done"
    with _lock(provided, provided.app()):
        assert asyncio.run(export()) is None
    assert len(tokens) == 1
    assert tokens[0] is not None
    assert lock.token is None  # released, and nothing leaked into this thread
    app.close()


def test_tokens_strictly_increase_across_holders(provided: Provided) -> None:
    apps = [provided.app() for _ in range(3)]
    tokens = []
    for n in range(9):
        lock = _lock(provided, apps[n % 3])
        with lock:
            tokens.append(lock.token)
    assert tokens == sorted(set(tokens)), tokens
    for app in apps:
        app.close()


def test_at_least_keeps_the_lock_after_a_quick_run(provided: Provided) -> None:
    app = provided.app()
    with _lock(provided, app, at_least=SECOND):
        pass
    other = _lock(provided, provided.app())
    with pytest.raises(LockHeld):
        other.acquire()
    time.sleep(1.2)
    with other:
        pass
    app.close()


def test_a_stale_holders_release_does_not_free_the_new_holder(
    provided: Provided, caplog: pytest.LogCaptureFixture
) -> None:
    app = provided.app()
    stale = _lock(provided, app, at_most=timedelta(milliseconds=300))
    stale.acquire()
    time.sleep(0.5)  # "paused" past at_most
    fresh = _lock(provided, provided.app())
    fresh.acquire()
    assert fresh.token is not None
    assert stale.token is not None
    assert fresh.token > stale.token
    with caplog.at_level(logging.WARNING, logger="oncely"):
        assert stale.release() is False
    assert "no longer held when released" in caplog.text
    with pytest.raises(LockHeld):
        _lock(provided, provided.app()).acquire()  # the fresh holder still holds it
    assert fresh.extend() is True
    assert fresh.release() is True
    app.close()


def test_a_lost_lease_cannot_be_extended(provided: Provided) -> None:
    app = provided.app()
    lock = _lock(provided, app, at_most=timedelta(milliseconds=300))
    with lock:
        assert lock.extend() is True
        time.sleep(0.5)
        with _lock(provided, provided.app(), at_most=timedelta(milliseconds=300)):
            assert lock.extend() is False
    app.close()


def test_at_most_lets_a_waiter_in_after_the_holder_is_killed(
    provided: Provided, tmp_path: Path
) -> None:
    ready = tmp_path / "held"
    script = textwrap.dedent(
        f"""
        import time, pathlib
        from datetime import timedelta
        import oncely
        app = oncely.App({provided.url!r})
        redis_url = {provided.redis_url!r}
        provider = oncely.locks.redis(redis_url) if redis_url else None
        lock = app.lock("export", at_most=timedelta(seconds=2), provider=provider)
        lock.acquire()
        pathlib.Path({str(ready)!r}).touch()
        time.sleep(60)
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert time.monotonic() < deadline, "the holder did not take the lock"
            assert holder.poll() is None, "the holder died"
            time.sleep(0.05)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        killed = time.monotonic()
        waiter = _lock(provided, provided.app(), blocking=True, timeout=10)
        with waiter:
            waited = time.monotonic() - killed
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    print(f"{provided.kind}: a waiter got the lock {waited:.2f} s after the holder was killed")
    assert waited < 2 + 1.5


def test_eight_threads_in_two_processes_never_overlap_and_lose_no_update(
    provided: Provided, tmp_path: Path
) -> None:
    seconds = float(os.environ.get("ONCELY_TEST_LOCK_CONTENTION_S", "10"))
    counter, log = tmp_path / "counter", tmp_path / "log"
    counter.write_text("0")
    provided.app().close()  # migrate before the processes race to
    args = [provided.kind, provided.url, provided.redis_url or "-", str(seconds)]
    processes = [
        subprocess.Popen(
            [sys.executable, str(HERE / "_contender.py"), *args, str(counter), str(log)]
        )
        for _ in range(2)
    ]
    for process in processes:
        assert process.wait(timeout=seconds + 60) == 0
    held = sorted(
        (float(start), float(end), int(token))
        for token, start, end in (line.split() for line in log.read_text().splitlines())
    )
    overlaps = sum(1 for a, b in itertools.pairwise(held) if b[0] < a[1])
    print(
        f"{provided.kind}: {len(held)} acquisitions by 16 threads in 2 processes over "
        f"{seconds:.0f} s; counter {counter.read_text()}; overlaps {overlaps}"
    )
    assert len(held) > 16
    assert int(counter.read_text()) == len(held)  # no lost update
    assert overlaps == 0
    assert len({token for *_, token in held}) == len(held)


def test_bad_lock_options_are_configuration_errors(provided: Provided) -> None:
    app = provided.app()
    for options in (
        {"at_most": timedelta(0)},
        {"at_most": 5},
        {"at_most": timedelta.max},  # overflowed the expiry: OverflowError escaped
        {"at_least": 20 * SECOND},
        {"timeout": -1},
    ):
        with pytest.raises(ConfigurationError):
            _lock(provided, app, **options)
    with pytest.raises(ConfigurationError):
        app.lock("", at_most=SECOND)
    lock = _lock(provided, app)
    with lock, pytest.raises(ConfigurationError, match="365 days"):
        lock.extend(timedelta.max)
    app.close()


class _Asking:
    """The lock's own provider, counting how often the lock asked for it."""

    def __init__(self, provider: LockProvider) -> None:
        self.provider = provider
        self.asked = 0

    def acquire(self, name: str, owner: str, ttl: timedelta) -> Lease | None:
        self.asked += 1
        return self.provider.acquire(name, owner, ttl)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.provider, name)


def test_a_blocking_wait_that_runs_out_raises_lock_held_naming_the_holder(
    provided: Provided,
) -> None:
    holder, waiter = provided.app(), provided.app()
    with _lock(provided, holder):
        lock = _lock(provided, waiter, blocking=True, timeout=0.3)
        asking = _Asking(lock.provider)
        lock.provider = asking  # type: ignore[assignment]
        with pytest.raises(LockHeld, match="lock 'export' is held by ") as held:
            lock.acquire()
        assert held.value.holder is not None
        assert "#" in held.value.holder  # hostname#pid
        assert asking.asked > 1  # it waited, asking again, before giving up
        assert lock.token is None

        @_lock(provided, waiter, blocking=True, timeout=0.1)
        def export() -> str:
            return "ran"

        assert export() is None  # the decorator's wait ran out too: skipped
    with lock:  # free again: the same lock takes it
        assert lock.token is not None
    holder.close(), waiter.close()


def test_release_and_extend_without_holding_raise_lock_held(provided: Provided) -> None:
    app = provided.app()
    lock = _lock(provided, app)
    with pytest.raises(LockHeld, match="lock 'export' is not held here: nothing to release"):
        lock.release()
    with pytest.raises(LockHeld, match="lock 'export' is not held here: nothing to extend"):
        lock.extend()
    with lock:
        elsewhere: list[BaseException] = []

        def in_another_thread() -> None:
            for attempt in (lock.release, lock.extend):
                try:
                    attempt()
                except LockHeld as exc:
                    elsewhere.append(exc)

        thread = threading.Thread(target=in_another_thread)
        thread.start()
        thread.join()
        assert [str(e) for e in elsewhere] == [
            "lock 'export' is not held here: nothing to release",
            "lock 'export' is not held here: nothing to extend",
        ]  # this thread's acquisition is not another thread's to end
        assert lock.token is not None
        with pytest.raises(LockHeld):
            _lock(provided, provided.app()).acquire()  # still held: the refusals freed nothing
    with pytest.raises(LockHeld, match="nothing to release"):
        lock.release()  # released once, by the with block
    app.close()
