"""What `oncely.store.sqlite.SqliteStore` writes of schedules (saves, materialising, invalid
rules), apart from its claims, bookings and transactions."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from oncely.model import Materialisation, Materialised, Saving, Schedule, Skipped, skip_cause
from oncely.store import claiming, saving
from oncely.store.base import Item, SqlStore
from oncely.store.dialect import Row
from oncely.store.records import tenant_column
from oncely.store.saving import occurrence_params
from oncely.store.sqlite_connections import SqliteConnections
from oncely.store.sqlite_values import micros, to_micros


class SqliteSchedules(SqliteConnections, SqlStore):
    """The schedule writes of `oncely.store.sqlite.SqliteStore`, each in one write transaction."""

    def save_schedules(
        self, batch: Sequence[Saving], now: datetime, *, within: Any = None
    ) -> list[Schedule]:
        if not batch:
            return []
        params = saving.batch_params(batch, now)
        items = [(n, item, params[n]) for n, item in enumerate(batch)]
        with self._write(within) as connection:
            existing, horizon = self._locked_to_save(connection, items)
            # The whole batch decided before any of it is written: an item refused late left
            # the earlier ones written in the caller's transaction, for it to commit.
            rows, occurrences, replaced_ids = self._decide(items, existing, horizon)
            if replaced_ids:
                supersede = {"ids": json.dumps(replaced_ids), "reason": saving.SUPERSEDED}
                self._changed(connection, "supersede_pending", supersede)
            stamp = to_micros(now)
            connection.executemany(
                self._sql["upsert_schedules"],
                [{**row, "next_run_at": micros(row["next_run_at"]), "now": stamp} for row in rows],
            )
            if occurrences:
                planned = saving.saved_occurrences(occurrences, to_micros)
                connection.executemany(
                    self._sql["insert_saved_occurrences"], [{**p, "now": stamp} for p in planned]
                )
        saved = []
        for item, row in zip(batch, rows, strict=True):
            stored = existing.get((row["tenant"], row["key"]))
            values = {
                "status": row["status"], "next_run_at": row["next_run_at"], "updated_at": now,
                "paused": False if stored is None else stored["paused"],
                "created_at": now if stored is None else stored["created_at"],
            }  # fmt: skip
            saved.append(saving.saved(values, item))
        return saved

    def _locked_to_save(
        self, connection: sqlite3.Connection, items: Sequence[Item]
    ) -> tuple[dict[tuple[str, str], Row], datetime | None]:
        """The stored rows of the keyed ``items`` and the history horizon, in one statement;
        none when every item is keyless (a new random key: nothing can be stored under it)."""
        pairs = [[p["tenant"], p["key"]] for _, item, p in items if not item.keyless]
        existing: dict[tuple[str, str], Row] = {}
        horizon: datetime | None = None
        if pairs:
            locking = {"pairs": json.dumps(pairs)}
            for found in self._rows(connection, "lock_schedules_to_save", locking):
                existing[found["tenant"], found["key"]] = found
                horizon = found["horizon"]
        return existing, horizon

    def materialise_many(self, batch: Sequence[Materialisation], now: datetime) -> Materialised:
        if not batch:
            return Materialised()
        new, skipped = 0, list[Skipped]()
        with self._write() as connection:
            for item in batch:
                done = self._materialise_one(connection, item, now)
                new += done.new
                skipped += done.skipped
        return Materialised(new, skipped)

    def _materialise_one(
        self, connection: sqlite3.Connection, item: Materialisation, now: datetime
    ) -> Materialised:
        stored_tenant = tenant_column(item.tenant)
        advance = {
            "tenant": stored_tenant,
            "key": item.key,
            "expected": item.expected_next_run_at,
            "next_run_at": item.next_run_at,
            "now": now,
        }
        row = self._row(connection, "advance_schedule", advance)
        if row is None or not item.planned:
            return Materialised()
        schedule_id, job = row["id"], row["job"]
        planned = item.planned
        skipped: list[Skipped] = []
        if item.stale_before is not None:
            stale = {"schedule_id": schedule_id, "before": item.stale_before,
                     "reason": item.stale_reason, "now": now}  # fmt: skip
            superseded = self._changed(connection, "supersede_stale", stale)
            skipped += [Skipped(job, "misfire")] * superseded
        if item.overlap != "allow":
            counts = self._row(connection, "in_progress", {"schedule_id": schedule_id})
            assert counts is not None
            planned = claiming.with_overlap(
                planned, item.overlap, counts["waiting"], counts["running"], now
            )
        new = 0
        # Skipped ones one at a time, each with its own change count: only what this call wrote
        # counts (one there already is left as it is). They are the older ones, written first;
        # the pending ones stay one executemany.
        for p in planned:
            if p.status == "skipped":
                params = occurrence_params(schedule_id, stored_tenant, p, now)
                if self._changed(connection, "insert_occurrence", params):
                    new += 1
                    skipped.append(Skipped(job, skip_cause(p.reason or "")))
        pending = [p for p in planned if p.status == "pending"]
        rows = [occurrence_params(schedule_id, stored_tenant, p, now) for p in pending]
        new += self._changed_each(connection, "insert_occurrence", rows)
        return Materialised(new, skipped)

    def mark_invalid(
        self, schedules: Sequence[tuple[str | None, str, str]], now: datetime
    ) -> list[tuple[str | None, str]]:
        stopped: list[tuple[str | None, str]] = []
        if not schedules:
            return stopped
        with self._write() as connection:
            for tenant, key, reason in schedules:
                params = {"tenant": tenant_column(tenant), "key": key}
                found = self._row(connection, "lock_schedule", params)
                if found is None or found["status"] != "active":
                    continue
                change = {"schedule_id": found["id"], "reason": reason, "now": now}
                self._changed(connection, "mark_invalid", change)
                if found["next_run_at"] is not None:
                    invalid = claiming.invalid_occurrence_params(
                        found["id"], params["tenant"], found["next_run_at"], reason, now
                    )
                    self._changed(connection, "insert_occurrence", invalid)
                stopped.append((tenant, key))
        return stopped
