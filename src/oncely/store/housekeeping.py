"""The dialect-free half of leases, sweeps and reclaims: what a lost worker's occurrence becomes,
and rows, with Python types, to vocabulary. Each dialect reads and writes in its own transaction."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from oncely.model import Lease, Reclaimed, Sweep
from oncely.store.records import tenant_of

# A released lease expires at the epoch: free for any `now`, and told apart from one that simply
# ran out, which its holder may still renew.
RELEASED = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Reclaim:
    """What one ``reclaimable`` row becomes: the ``reclaim`` parameters and the report of it."""

    params: dict[str, Any]
    report: Reclaimed


def reclaim(values: Mapping[str, Any], budget: int, now: datetime) -> Reclaim:
    """Decide what the lost attempt in ``values`` (a ``reclaimable`` row) leaves behind."""
    owner = values["lease_owner"]
    attempts = values["attempts"]
    lost = (
        f"worker {owner if owner is not None else '(unknown)'} was lost during attempt "
        f"{attempts} (lease expired)"
    )
    status: Literal["retrying", "failed"]
    if values["schedule_status"] == "removed":
        status, error = "failed", f"{lost}; its schedule was removed, so it does not run again"
    elif attempts < budget:
        status, error = "retrying", lost
    else:
        status, error = "failed", f"{lost} and that was the last of {budget} attempts"
    report = Reclaimed(
        key=values["key"],
        tenant=tenant_of(values["tenant"]),
        scheduled_for=values["scheduled_for"].astimezone(UTC),
        owner=owner,
        attempts=attempts,
        status=status,
    )
    params = {
        "id": values["id"],
        "scheduled_for": values["scheduled_for"],
        "fence": values["fence"],
        "status": status,
        "error": error,
        "now": now,
    }
    return Reclaim(params, report)


def lease(values: Mapping[str, Any]) -> Lease:
    """Map one lease row to a `Lease`."""
    return Lease(
        name=values["name"],
        owner=values["owner"],
        token=values["token"],
        expires_at=values["expires_at"].astimezone(UTC),
    )


def lease_params(lease: Lease) -> dict[str, Any]:
    """The parameters that name ``lease``'s acquisition: ``renew_lease`` adds ``until``."""
    return {"name": lease.name, "token": lease.token, "released": RELEASED}


def sweep(values: Mapping[str, Any]) -> Sweep:
    """Map one ``select_sweeps`` row to a `Sweep`."""
    return Sweep(
        worker=values["worker"],
        started_at=values["started_at"].astimezone(UTC),
        finished_at=values["finished_at"].astimezone(UTC),
        pruned=values["pruned"],
        reclaimed=values["reclaimed"],
        abandoned=values["abandoned"],
        error=values["error"],
    )


def sweep_params(sweep: Sweep) -> dict[str, Any]:
    """The parameters of ``insert_sweep``, times still as datetimes."""
    return {
        "worker": sweep.worker,
        "started_at": sweep.started_at,
        "finished_at": sweep.finished_at,
        "pruned": sweep.pruned,
        "reclaimed": sweep.reclaimed,
        "abandoned": sweep.abandoned,
        "error": sweep.error,
    }


def orphan_params(
    values: Mapping[str, Any], now: datetime, lost_before: datetime
) -> dict[str, Any]:
    """``fail_orphan`` parameters for one ``orphaned`` row."""
    return {
        "id": values["id"],
        "scheduled_for": values["scheduled_for"],
        "fence": values["fence"],
        "now": now,
        "lost_before": lost_before,
        "error": (
            f"the worker of attempt {values['attempts']} was lost (lease expired) and no "
            f"running worker declares job {values['job']}, so nothing reclaimed it"
        ),
    }
