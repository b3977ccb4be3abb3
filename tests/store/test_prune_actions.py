"""Pruning takes the actions people took with the history: older than the horizon, they go."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from oncely.model import Action
from oncely.store import Store

BEFORE = datetime(2026, 10, 30, 12, 0, tzinfo=UTC)  # the retention horizon


def test_prune_deletes_the_actions_recorded_before_the_horizon(store: Store) -> None:
    for tenant in (None, "acme"):
        for at in (BEFORE - timedelta(days=1), BEFORE, BEFORE + timedelta(days=1)):
            store.record_action(Action(at, "beat", tenant, "pause", "ada", "outage"))
    assert store.prune(BEFORE, 100) == 0  # counts occurrences only
    for tenant in (None, "acme"):
        kept = store.actions(tenant, None)
        assert [a.at for a in kept] == [BEFORE + timedelta(days=1), BEFORE]
