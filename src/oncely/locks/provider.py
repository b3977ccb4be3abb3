"""Where a lock lives: the one interface every lock provider implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import timedelta

from oncely.model import Lease


class LockProvider(ABC):
    """Named leases with fencing tokens, timed by the provider's own clock.

    Times come from the provider's server (the database's, Redis's), never from the caller, so
    instances whose clocks disagree still agree on who holds a lock. Every method raises
    `LockUnavailable` (an `OncelyError`) when the provider cannot be reached: a caller that
    cannot tell whether it holds the lock must act as if it does not (fail closed).
    """

    @abstractmethod
    def acquire(self, name: str, owner: str, ttl: timedelta) -> Lease | None:
        """Take ``name`` for ``ttl`` if nobody holds it or the holder's lease has expired.

        Returns the `Lease`, whose ``token`` is greater than every earlier acquisition's of the
        same name on this provider; None when someone else holds it. Atomic: of any number of
        concurrent callers at most one gets it.
        """

    @abstractmethod
    def extend(self, lease: Lease, ttl: timedelta) -> Lease | None:
        """Hold ``lease`` until ``ttl`` from now; None if it is no longer held by it (expired
        and taken by another acquisition, or released). Never revives a lease another took."""

    @abstractmethod
    def release(self, lease: Lease, keep: timedelta = timedelta(0)) -> bool:
        """Let go of ``lease``, or with ``keep`` > 0 keep it until ``keep`` from now (a lock's
        ``at_least``). Only the holder of that token can: returns False, changing nothing, when
        the lease was already taken by another acquisition or had been released."""

    @abstractmethod
    def holder(self, name: str) -> Lease | None:
        """The unexpired lease on ``name``, if any (for messages: it may change at once)."""

    @abstractmethod
    def close(self) -> None:
        """Release the provider's own connections, if it has any."""
