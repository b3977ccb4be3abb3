"""What a handler receives: the occurrence it runs, and how to tell its lease is gone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from oncely.model import Claim


class Run:
    """One attempt at one occurrence, as the handler sees it.

    ``idempotency_key`` is the same for every attempt at the same occurrence, whichever worker
    makes it: use it to make side effects safe to repeat (delivery is at least once by default).
    It is ``TENANT/KEY/TIME`` with ``%`` and ``/`` percent-escaped in the tenant ('' for none) and
    the key, and TIME the scheduled time in ISO 8601 UTC: distinct occurrences never share one.
    ``fence`` is strictly greater than any earlier attempt's on the same schedule. ``lease_lost``
    turns True once another worker may have taken over: stop writing. ``connection`` is the
    open transaction of a ``delivery="transactional"`` job, None otherwise.
    """

    __slots__ = ("_clock", "_lost", "claim", "connection")

    def __init__(self, claim: Claim, clock: Callable[[], datetime], connection: Any = None) -> None:
        self.claim = claim
        self.connection = connection
        self._clock = clock
        self._lost = False

    @property
    def job(self) -> str:
        return self.claim.job

    @property
    def key(self) -> str:
        return self.claim.key

    @property
    def scheduled_for(self) -> datetime:
        return self.claim.scheduled_for

    @property
    def attempt(self) -> int:
        return self.claim.attempt

    @property
    def payload(self) -> Any:
        return self.claim.payload

    @property
    def tenant(self) -> str | None:
        return self.claim.tenant

    @property
    def fence(self) -> int:
        return self.claim.fence

    @property
    def idempotency_key(self) -> str:
        claim = self.claim
        return idempotency_key(claim.tenant, claim.key, claim.scheduled_for)

    @property
    def lease_lost(self) -> bool:
        return self._lost or self._clock() >= self.claim.lease_expires_at

    def mark_lease_lost(self) -> None:
        self._lost = True

    def __repr__(self) -> str:
        return (
            f"<oncely.Run {self.job} key={self.key!r} "
            f"scheduled_for={self.scheduled_for.isoformat()} attempt={self.attempt}>"
        )


def idempotency_key(tenant: str | None, key: str, scheduled_for: datetime) -> str:
    """The idempotency key every attempt at occurrence (tenant, key, scheduled_for) is given."""
    # "%" and "/" escaped in each part: joined as they were, tenant "acme" with key
    # "eu/invoice" and tenant "acme/eu" with key "invoice" had one key.
    escaped = (p.replace("%", "%25").replace("/", "%2F") for p in (tenant or "", key))
    tenant_part, key_part = escaped
    return f"{tenant_part}/{key_part}/{scheduled_for.isoformat()}"
