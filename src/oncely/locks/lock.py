"""`app.lock(...)`: whichever instance takes the lock runs; the others skip (ShedLock-style).

One `Lock` object may be used by many threads and tasks at once (a decorated function called
concurrently): each call or ``with`` block makes its own acquisition, kept in a context
variable, so ``lock.token`` is the token of the acquisition the current thread or task holds.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Any, TypeVar, cast

from oncely.errors import ConfigurationError, LockHeld, LockUnavailable
from oncely.locks.provider import LockProvider
from oncely.model import Lease

log = logging.getLogger("oncely")

F = TypeVar("F", bound=Callable[..., Any])

#: Lock names oncely takes itself (``oncely:reconcile``, ``oncely:housekeeping``): `oncely.App.lock`
#: refuses them.
RESERVED_LOCK_PREFIX = "oncely:"

# A blocking acquisition asks again after this long, doubling up to the cap.
_FIRST_RETRY_S = 0.05
_RETRY_CAP_S = 1.0


_SHORTEST = timedelta(milliseconds=1)
# A lease past this is a mistake, and timedelta.max overflowed the expiry's datetime.
_LONGEST = timedelta(days=365)


@dataclass(frozen=True, slots=True)
class _Held:
    lease: Lease
    since: float  # time.monotonic() when acquired


class Lock:
    """A named distributed lock; see `oncely.App.lock`.

    ``at_most`` bounds how long a holder that died (or hangs) keeps others out: its lease
    expires then. ``at_least`` keeps the lock after a quick run, so instances whose clocks
    disagree by a few seconds do not each run the same once-a-day work. ``blocking=True`` waits
    up to ``timeout`` seconds (None: up to ``at_most``) instead of giving up at once.
    """

    def __init__(
        self,
        name: str,
        *,
        at_most: timedelta,
        at_least: timedelta = timedelta(0),
        provider: LockProvider,
        owner: Callable[[], str],
        blocking: bool = False,
        timeout: float | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"lock name {name!r}: give a non-empty string")
        if "\x00" in name or not name.isprintable() or len(name.encode("utf-8", "replace")) > 200:
            raise ConfigurationError(
                f"lock name {name[:60]!r}: give at most 200 bytes of printable text"
            )
        if not isinstance(blocking, bool):
            raise ConfigurationError(f"lock {name!r}: blocking={blocking!r}: give True or False")
        if not isinstance(at_most, timedelta) or not _SHORTEST <= at_most <= _LONGEST:
            raise ConfigurationError(
                f"lock {name!r}: at_most={at_most!r} must be a timedelta from 1 ms to "
                f"{_LONGEST.days} days: how long a holder that died keeps the others out"
            )
        if not isinstance(at_least, timedelta) or not timedelta(0) <= at_least <= at_most:
            raise ConfigurationError(
                f"lock {name!r}: at_least={at_least!r} must be a timedelta from 0 to "
                f"at_most ({at_most})"
            )
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0
        ):
            raise ConfigurationError(f"lock {name!r}: timeout={timeout!r}: give seconds >= 0")
        self.name = name
        self.at_most = at_most
        self.at_least = at_least
        self.provider = provider
        self.blocking = blocking
        self.timeout = timeout
        self._owner = owner
        self._held: contextvars.ContextVar[tuple[_Held, ...]] = contextvars.ContextVar(
            f"oncely.lock.{name}", default=()
        )

    # --- acquisition -------------------------------------------------------------------------

    @property
    def token(self) -> int | None:
        """The fencing token of the acquisition this thread or task holds, None if none.

        Strictly greater than every earlier acquisition's of this name on this provider: a
        downstream write that stores the greatest token it has seen and refuses smaller ones
        cannot be made by a holder that was paused past its lease (see docs/locks.md).
        """
        held = self._held.get()
        return held[-1].lease.token if held else None

    def acquire(self) -> Lease:
        """Take the lock for this thread or task; raises `LockHeld` if another holds it
        (after waiting, when blocking), `LockUnavailable` if its provider cannot be reached."""
        lease = self._take()
        self._held.set((*self._held.get(), _Held(lease, time.monotonic())))
        return lease

    def release(self) -> bool:
        """Let go of this thread's or task's latest acquisition, keeping the lock until
        ``at_least`` after it was taken. Returns False, and logs, when the lease had already
        expired and been taken by another: never frees another holder's lock. Never raises
        `LockUnavailable`: what the lock guarded has run by now, so a provider that fails here
        is logged at ERROR and False returned; the lease then expires at ``at_most``."""
        held = self._held.get()
        if not held:
            raise LockHeld(f"lock {self.name!r} is not held here: nothing to release")
        self._held.set(held[:-1])
        mine = held[-1]
        ran = timedelta(seconds=time.monotonic() - mine.since)
        try:
            kept = self.provider.release(mine.lease, keep=max(self.at_least - ran, timedelta(0)))
        except LockUnavailable as exc:
            # Raised here, it said "what the lock guards does not run" after it had run: a
            # caller retrying on it ran the work twice.
            log.error(
                "oncely: lock %r could not be released (token %d): what it guarded has run; its "
                "provider failed (%s), and the lock is held until at_most (%s) runs out",
                self.name,
                mine.lease.token,
                exc,
                self.at_most,
            )
            return False
        if not kept:
            log.warning(
                "oncely: lock %r was no longer held when released (token %d): at_most (%s) ran "
                "out after %.1f s and another holder may have run meanwhile, with a greater "
                "token",
                self.name,
                mine.lease.token,
                self.at_most,
                ran.total_seconds(),
            )
        return kept

    def extend(self, by: timedelta | None = None) -> bool:
        """Hold the current acquisition ``by`` (default ``at_most``) from now; False when it was
        lost meanwhile (expired and taken by another), which the caller must treat as "stop"."""
        held = self._held.get()
        if not held:
            raise LockHeld(f"lock {self.name!r} is not held here: nothing to extend")
        ttl = self.at_most if by is None else by
        if not isinstance(ttl, timedelta) or not _SHORTEST <= ttl <= _LONGEST:
            raise ConfigurationError(
                f"lock {self.name!r}: extend by {by!r}: give a timedelta from 1 ms to "
                f"{_LONGEST.days} days"
            )
        lease = self.provider.extend(held[-1].lease, ttl)
        if lease is None:
            return False
        self._held.set((*held[:-1], _Held(lease, held[-1].since)))
        return True

    def _take(self) -> Lease:
        owner = self._owner()
        lease = self.provider.acquire(self.name, owner, self.at_most)
        if lease is not None:
            return lease
        if self.blocking:
            lease = self._wait(owner)
            if lease is not None:
                return lease
        holder = self.provider.holder(self.name)
        who = "another instance" if holder is None else holder.owner
        until = "" if holder is None else f" until {holder.expires_at.isoformat()}"
        raise LockHeld(f"lock {self.name!r} is held by {who}{until}", holder=who)

    def _wait(self, owner: str) -> Lease | None:
        """Ask again with a capped backoff until the lock is free or the timeout has passed."""
        timeout = self.at_most.total_seconds() if self.timeout is None else self.timeout
        deadline = time.monotonic() + timeout
        pause = _FIRST_RETRY_S
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(pause, left))
            pause = min(pause * 2, _RETRY_CAP_S)
            lease = self.provider.acquire(self.name, owner, self.at_most)
            if lease is not None:
                return lease
        return None

    # --- with lock: ... ------------------------------------------------------------------------

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    # --- @lock ----------------------------------------------------------------------------------

    def __call__(self, func: F) -> F:
        """Decorate ``func`` (sync or async): it runs only while holding the lock; when another
        holds it, the call is skipped and returns None (logged at INFO with the holder). When the
        provider is unreachable the call raises `LockUnavailable` and ``func`` does not run."""
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                context = contextvars.copy_context()
                try:
                    await asyncio.to_thread(context.run, self.acquire)
                except LockHeld as held:
                    self._skipped(func, held)
                    return None
                # The acquisition lives in `context`; the task's own context does not see it.
                token = context.run(self._held.get)
                restore = self._held.set(token)
                try:
                    return await func(*args, **kwargs)
                finally:
                    self._held.reset(restore)
                    await asyncio.to_thread(context.run, self.release)

            return cast(F, guarded_async)

        @functools.wraps(func)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                self.acquire()
            except LockHeld as held:
                self._skipped(func, held)
                return None
            try:
                return func(*args, **kwargs)
            finally:
                self.release()

        return cast(F, guarded)

    def _skipped(self, func: Callable[..., Any], held: LockHeld) -> None:
        log.info(
            "oncely: %s skipped: lock %r is held by %s",
            getattr(func, "__qualname__", func),
            self.name,
            held.holder or "another instance",
        )

    def __repr__(self) -> str:
        return f"<oncely.Lock {self.name!r} at_most={self.at_most} at_least={self.at_least}>"
