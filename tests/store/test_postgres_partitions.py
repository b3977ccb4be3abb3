"""PostgreSQL's occurrences by day: a day's partition is made before a row needs it, and retention
detaches and drops whole days instead of deleting rows (Store.prune, migration 0014)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from oncely import at
from oncely.errors import InvalidSchedule
from oncely.model import Claim, Planned, Saving
from oncely.store import PostgresStore, open_store

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)
LEASE = timedelta(minutes=5)


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    opened = open_store(postgres_url)
    assert isinstance(opened, PostgresStore)
    yield opened
    opened.close()


def defer(store: PostgresStore, key: str, when: datetime) -> None:
    """``key`` deferred to ``when``, as `App.defer` saves it (guarded by the horizon)."""
    instance = at(when).next_instance_after(when - timedelta(microseconds=1))
    assert instance is not None
    planned = [Planned(instance, origin="defer")]
    saving = Saving(None, key, "j", at(when), occurrences=planned, guard_horizon=True)
    store.save_schedules([saving], when)


def claim(store: PostgresStore, when: datetime) -> list[Claim]:
    return store.claim_due(
        owner="host#1", lease=LEASE, limit=100, now=when, jobs=["j"], reclaim=["j"], serial=[]
    )


def ran(store: PostgresStore, key: str, when: datetime) -> None:
    """A one-off of ``key`` at ``when`` that ran and succeeded."""
    defer(store, key, when)
    claimed = [c for c in claim(store, when) if c.key == key]
    assert store.book_success(claimed, when) == claimed


def days(url: str) -> list[str]:
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'oncely_occurrences'::regclass ORDER BY 1"
        ).fetchall()
    return [row[0].removeprefix("oncely_occurrences_p") for row in rows]


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement this process sends, as text."""
    sent: list[str] = []
    for cls in (psycopg.Cursor, psycopg.Connection):
        unrecorded = cls.execute

        def execute(self: Any, query: Any, *args: Any, _send: Any = unrecorded, **kw: Any) -> Any:
            text = query if isinstance(query, str) else getattr(query, "as_string", repr)(self)
            sent.append(text if isinstance(text, str) else repr(text))
            return _send(self, query, *args, **kw)

        monkeypatch.setattr(cls, "execute", execute)
    return sent


def test_retention_drops_whole_days_and_deletes_no_occurrence(
    store: PostgresStore, postgres_url: str, statements: list[str]
) -> None:
    for n in range(3):  # three old days, two finished one-offs each
        ran(store, f"old{n}a", NOW - (40 - n) * DAY)
        ran(store, f"old{n}b", NOW - (40 - n) * DAY + timedelta(hours=5))
    ran(store, "recent", NOW - DAY)
    before = days(postgres_url)
    assert {"20261020", "20261021", "20261022", "20261128"} <= set(before)
    statements.clear()
    assert store.prune(NOW - 30 * DAY, 1000) == 6
    after = days(postgres_url)
    assert not {"20261020", "20261021", "20261022"} & set(after)
    assert "20261128" in after
    assert [o.key for o in store.history(None)] == ["recent"]
    deleting = [s for s in statements if "DELETE FROM oncely_occurrences" in s]
    assert deleting == []
    assert any("DETACH PARTITION" in s for s in statements)
    # Whole days: the cut is the start of the retention's day, and so is the horizon.
    assert store.history_horizon() == datetime(2026, 10, 30, tzinfo=UTC)


def test_a_day_still_holding_work_keeps_its_partition_and_loses_its_finished_rows(
    store: PostgresStore, postgres_url: str
) -> None:
    old = NOW - 40 * DAY
    for n in range(3):
        ran(store, f"done{n}", old + n * timedelta(minutes=1))
    defer(store, "still-pending", old + timedelta(hours=1))  # its job's workers were all down
    (held,) = [c for c in claim(store, old + timedelta(hours=1)) if c.key == "still-pending"]
    assert store.prune(NOW - 30 * DAY, 1000) == 3  # deleted as rows, in a batch
    assert "20261020" in days(postgres_url)
    assert [o.key for o in store.history(None)] == ["still-pending"]
    store.book_success([held], NOW)
    assert store.prune(NOW - 30 * DAY, 1000) == 1  # nothing left running: the day goes
    assert "20261020" not in days(postgres_url)


def test_a_dropped_day_still_refuses_what_it_ran(store: PostgresStore) -> None:
    # De-duplication outlives the day's partition: the schedule row and the horizon stay.
    when = NOW - 40 * DAY
    ran(store, "ran-once", when)
    store.prune(NOW - 30 * DAY, 1000)
    assert store.history(None) == []
    defer(store, "ran-once", when)  # the same key and time again: nothing new to run
    assert claim(store, NOW) == []
    with pytest.raises(InvalidSchedule, match="pruned"):
        defer(store, "ran-once", when - timedelta(hours=1))  # moved before the horizon


def test_a_timer_far_ahead_gets_its_own_day(store: PostgresStore, postgres_url: str) -> None:
    far = NOW + 400 * DAY
    defer(store, "next-year", far)
    assert f"{far:%Y%m%d}" in days(postgres_url)
    (claimed,) = claim(store, far)
    assert claimed.key == "next-year"


def test_prepare_history_makes_today_and_the_week_ahead(
    store: PostgresStore, postgres_url: str
) -> None:
    later = datetime(2027, 3, 1, 23, 0, tzinfo=UTC)
    store.prepare_history(later)
    made = set(days(postgres_url))
    assert {f"{later + n * DAY:%Y%m%d}" for n in range(8)} <= made


def test_a_day_dropped_by_another_process_is_made_again_for_a_write(
    store: PostgresStore, postgres_url: str
) -> None:
    # This process knows the day (it wrote there); another drops it; this one writes there
    # again (a new key before the horizon is accepted): the write fails for want of the
    # partition, and is made again and written, once.
    when = NOW - 40 * DAY
    ran(store, "first", when)
    other = open_store(postgres_url)
    try:
        other.prune(NOW - 30 * DAY, 1000)
    finally:
        other.close()
    assert f"{when:%Y%m%d}" not in days(postgres_url)
    defer(store, "second", when)
    assert [c.key for c in claim(store, when)] == ["second"]
