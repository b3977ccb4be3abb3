"""History across tenants is every tenant's history merged newest first, whatever the filters.

On PostgreSQL it is read tenant by tenant (found by skipping through the (tenant, scheduled_for)
index) and merged; a merge that dropped a tenant, kept more than the limit of one, or ordered
within tenants only would pass a test of one tenant or of one row each.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncely import every
from oncely.model import Planned
from oncely.store import Store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TRIGGER = every(minutes=1)
TENANTS = [None, "acme", "b", "zed"]
STATUSES = ["pending", "skipped"]
#: What each test's store holds, by dialect: examples add to it, each at later times.
_WRITTEN: dict[str, list[tuple[datetime, str | None, str, str]]] = {}
_MINUTES = itertools.count()
_KEYS = itertools.count()


def _write(store: Store, tenant: str | None, statuses: list[str]) -> None:
    key = f"k{next(_KEYS)}"
    store.save_schedule(
        tenant=tenant, key=key, job="sync", origin="code", trigger=TRIGGER, payload=None,
        next_run_at=NOW, now=NOW,
    )  # fmt: skip
    planned = []
    for status in statuses:
        when = NOW + timedelta(minutes=next(_MINUTES))
        instance = TRIGGER.next_instance_after(when - timedelta(seconds=1))
        assert instance is not None
        planned.append(Planned(instance, status, None if status == "pending" else "misfire"))  # type: ignore[arg-type]
        _WRITTEN[store.dialect].append((instance.at, tenant, key, status))
    store.materialise(tenant, key, planned, expected_next_run_at=NOW, next_run_at=None, now=NOW)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    schedules=st.lists(
        st.tuples(st.sampled_from(TENANTS), st.lists(st.sampled_from(STATUSES), max_size=6)),
        max_size=5,
    ),
    limit=st.integers(1, 40),
    status=st.sampled_from([None, *STATUSES]),
    window=st.none() | st.tuples(st.integers(0, 400), st.integers(0, 400)),
)
def test_every_tenants_history_is_all_history_newest_first(
    store: Store,
    schedules: list[tuple[str | None, list[str]]],
    limit: int,
    status: str | None,
    window: tuple[int, int] | None,
) -> None:
    written = _WRITTEN.setdefault(store.dialect, [])
    if not written:
        _write(store, "acme", ["pending"])  # never empty: the first tenant is found by a probe
    for tenant, statuses in schedules:
        _write(store, tenant, statuses)
    since = until = None
    if window is not None:
        since, until = (NOW + timedelta(minutes=m) for m in sorted(window))
    newest_first = [
        (when, tenant, key, kind)
        for when, tenant, key, kind in sorted(written, reverse=True, key=lambda row: row[0])
        if (status is None or kind == status)
        and (since is None or when >= since)
        and (until is None or when < until)
    ]
    found = store.history(
        None,
        all_tenants=True,
        limit=limit,
        status=status,
        since=since,
        until=until,  # type: ignore[arg-type]
    )
    assert [(o.scheduled_for, o.tenant, o.key, o.status) for o in found] == newest_first[:limit]
    for tenant in TENANTS:
        mine = store.history(tenant, limit=limit, status=status, since=since, until=until)  # type: ignore[arg-type]
        theirs = [(when, key) for when, owner, key, _ in newest_first if owner == tenant]
        assert [(o.scheduled_for, o.key) for o in mine] == theirs[:limit]


#: What each store holds of two keys: "shared" in every tenant, "alone" in one.
_KEYED: dict[str, list[tuple[datetime, str | None, str, str]]] = {}


def _write_keyed(store: Store) -> list[tuple[datetime, str | None, str, str]]:
    written: list[tuple[datetime, str | None, str, str]] = []
    rows = [(tenant, "shared") for tenant in TENANTS] + [("b", "alone")]
    for n, (tenant, key) in enumerate(rows):
        store.save_schedule(
            tenant=tenant, key=key, job="sync", origin="code", trigger=TRIGGER, payload=None,
            next_run_at=NOW, now=NOW,
        )  # fmt: skip
        planned = []
        for m in range(8):  # the tenants' times interleave
            instance = TRIGGER.next_instance_after(NOW + timedelta(minutes=m * 7 + n))
            assert instance is not None
            status = STATUSES[(m + n) % 2]
            planned.append(Planned(instance, status, None if status == "pending" else "misfire"))  # type: ignore[arg-type]
            written.append((instance.at, tenant, key, status))
        store.materialise(tenant, key, planned, expected_next_run_at=NOW, next_run_at=None, now=NOW)
    return written


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    key=st.sampled_from(["shared", "alone", "nobody"]),
    limit=st.integers(1, 40),
    status=st.sampled_from([None, *STATUSES]),
    window=st.none() | st.tuples(st.integers(0, 70), st.integers(0, 70)),
)
def test_a_keys_history_of_every_tenant_is_each_tenants_merged(
    store: Store, key: str, limit: int, status: str | None, window: tuple[int, int] | None
) -> None:
    # Read tenant by tenant (each found by a probe of the schedules' (tenant, key) index) and
    # merged: a read that stopped at the first tenant, or ordered within tenants only, would
    # pass with the key in one tenant.
    if store.dialect not in _KEYED:
        _KEYED[store.dialect] = _write_keyed(store)
    since = until = None
    if window is not None:
        since, until = (NOW + timedelta(minutes=m) for m in sorted(window))
    newest_first = [
        (when, tenant, kind)
        for when, tenant, its_key, kind in sorted(_KEYED[store.dialect], reverse=True)
        if its_key == key
        and (status is None or kind == status)
        and (since is None or when >= since)
        and (until is None or when < until)
    ]
    found = store.history(
        None, key=key, all_tenants=True, limit=limit, status=status, since=since, until=until,  # type: ignore[arg-type]
    )  # fmt: skip
    assert [(o.scheduled_for, o.tenant, o.status) for o in found] == newest_first[:limit]
    for tenant in TENANTS:
        mine = store.history(tenant, key=key, limit=limit, status=status, since=since, until=until)  # type: ignore[arg-type]
        theirs = [(when, kind) for when, owner, kind in newest_first if owner == tenant]
        assert [(o.scheduled_for, o.status) for o in mine] == theirs[:limit]
