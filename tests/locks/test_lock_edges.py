"""Issue 21.6: a release that fails after the body ran does not say the body did not run; the
names oncely locks itself are reserved; locks are not re-entrant."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from _lock_support import Provided

import oncely
from _proxy import TcpProxy, proxied


@pytest.fixture(params=["postgres", "redis"])
def cut_during_hold(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[Callable[[str], oncely.Lock], TcpProxy]]:
    """Locks whose provider is reached through a proxy the test cuts while holding one (once: a
    pool that saw the cut may take longer than a call's wait to connect again)."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    with proxied(url) as (proxy, through):
        if request.param == "postgres":
            app = oncely.App(through)
            provider = None
        else:
            app = oncely.App(request.getfixturevalue("sqlite_url"))
            provider = oncely.locks.redis(through)
        try:
            yield (
                lambda name: app.lock(name, at_most=timedelta(seconds=10), provider=provider),
                proxy,
            )
        finally:
            app.close()


@pytest.mark.parametrize("use", ["decorated", "with"])
def test_a_release_that_fails_after_the_body_ran_keeps_its_return_value(
    cut_during_hold: tuple[Callable[[str], oncely.Lock], TcpProxy],
    caplog: pytest.LogCaptureFixture,
    use: str,
) -> None:
    make_lock, proxy = cut_during_hold
    lock = make_lock("export")
    ran: list[str] = []

    @lock
    def export() -> int:
        ran.append("decorated")
        proxy.cut()  # the provider drops while the lock is held
        return 42

    with caplog.at_level(logging.ERROR, logger="oncely"):
        # It raised LockUnavailable ("what it guards does not run") after the body had run.
        if use == "decorated":
            assert export() == 42
        else:
            with lock:
                ran.append("with")
                proxy.cut()
    assert ran == [use]
    (released,) = [r for r in caplog.records if "could not be released" in r.getMessage()]
    assert "has run" in released.getMessage()


@pytest.mark.parametrize("name", ["oncely:reconcile", "oncely:housekeeping", "oncely:"])
def test_lock_names_oncely_uses_itself_are_reserved(sqlite_url: str, name: str) -> None:
    app = oncely.App(sqlite_url)
    # A user lock named oncely:reconcile made every tick wait 60 s for it, then fail.
    with pytest.raises(oncely.ConfigurationError, match="reserved"):
        app.lock(name, at_most=timedelta(minutes=1))
    app.lock("oncely-export", at_most=timedelta(minutes=1))
    app.close()


def test_locks_are_not_reentrant(provided: Provided) -> None:
    app = provided.app()
    lock = app.lock("export", at_most=timedelta(seconds=10), provider=provided.provider(app))
    calls: list[object] = []

    @lock
    def export(depth: int) -> str:
        calls.append(export(depth + 1) if depth == 0 else "inner ran")
        return "outer ran"

    try:
        assert export(0) == "outer ran"
        assert calls == [None]  # the nested call was skipped: the lock was held (by itself)
        with lock:
            with pytest.raises(oncely.LockHeld), lock:
                pass
            assert lock.token is not None
        assert lock.token is None
    finally:
        app.close()
