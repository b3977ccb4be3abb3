"""How SQLite holds oncely's values: times as integer microseconds since the epoch, JSON as
text; parameters bound and rows read back in Python's types."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from oncely.store import payloads

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(t: datetime) -> int:
    """Aware ``t`` as integer microseconds since the epoch (the SQLite time column type)."""
    return (t - _EPOCH) // timedelta(microseconds=1)


def micros(t: datetime | None) -> int | None:
    return None if t is None else to_micros(t)


def from_micros(value: int) -> datetime:
    """The aware UTC datetime of a time column."""
    return _EPOCH + timedelta(microseconds=value)


TIME_COLUMNS = frozenset(
    {
        "next_run_at", "created_at", "updated_at", "scheduled_for", "started_at", "finished_at",
        "run_after", "lease_expires_at", "expires_at", "first_seen_at", "last_seen_at",
        "applied_at", "previous_finished_at", "at", "horizon", "before", "due", "paused_until",
        "heartbeat_at",
    }
)  # fmt: skip

JSON_COLUMNS = frozenset({"payload", "trigger_spec"})


def bound(params: Mapping[str, Any]) -> dict[str, Any]:
    """Query parameters for SQLite: every aware datetime becomes integer microseconds."""
    return {k: to_micros(v) if isinstance(v, datetime) else v for k, v in params.items()}


def decoded(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    """The cursor's rows by column name, with time columns back as aware UTC datetimes and JSON
    columns decoded (a stored value that does not decode becomes `Unreadable`)."""
    rows = cursor.fetchall()
    if not rows:
        return []
    # Which columns to convert is asked once per result, not once per row: per row, it was a
    # tenth of a burst's claim time.
    names = [column[0] for column in cursor.description]
    times = [name for name in names if name in TIME_COLUMNS]
    texts = [name for name in names if name in JSON_COLUMNS]
    result = []
    for row in rows:
        values = dict(zip(names, row, strict=True))
        for name in times:
            if values[name] is not None:
                values[name] = from_micros(values[name])
        for name in texts:
            if isinstance(values[name], str):
                values[name] = payloads.decode(values[name])
        result.append(values)
    return result
