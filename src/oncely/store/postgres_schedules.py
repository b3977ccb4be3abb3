"""PostgreSQL's writes of schedules: saving them (one batch, pipelined), materialising their
occurrences, and stopping those whose stored rule no longer reads."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg

from oncely.model import Materialisation, Materialised, Saving, Schedule, Skipped, skip_cause
from oncely.store import claiming, records, saving
from oncely.store.base import Decision, SqlStore
from oncely.store.dialect import Row
from oncely.store.postgres_connections import Connection
from oncely.store.postgres_partitions import PostgresPartitions
from oncely.store.records import tenant_column
from oncely.store.saving import SAVE_CHUNK, occurrence_params


class PostgresSchedules(PostgresPartitions, SqlStore):
    """What `oncely.store.postgres.PostgresStore` writes of schedules (saves, materialising,
    invalid rules), apart from its claims, bookings and wake-up channel."""

    def save_schedules(
        self, batch: Sequence[Saving], now: datetime, *, within: Any = None
    ) -> list[Schedule]:
        if not batch:
            return []
        return self._inserting(lambda: self._save_schedules(batch, now, within), within)

    def _save_schedules(
        self, batch: Sequence[Saving], now: datetime, within: Any
    ) -> list[Schedule]:
        params = saving.batch_params(batch, now)
        self._before_inserting(p.instance.at for item in batch for p in item.occurrences)
        # Written in (tenant, key) order, the whole batch across its chunks: two batches of the
        # same new keys in opposite orders each took half of them and deadlocked on the rest.
        order = sorted(range(len(batch)), key=lambda n: (params[n]["tenant"], params[n]["key"]))
        chunks = [
            [(n, batch[n], params[n]) for n in order[start : start + SAVE_CHUNK]]
            for start in range(0, len(order), SAVE_CHUNK)
        ]
        with self._writing(within) as connection:
            if within is None and len(batch) == 1 and not batch[0].keyless:
                new = self._saved_if_new(connection, batch[0], params[0], now)
                if new is not None:
                    return [new]
            existing, horizon = self._locked_to_save(connection, batch, params, order)
            # Every chunk decided before any is written: an item refused in a later chunk left
            # the earlier ones written in the caller's transaction, for it to commit.
            decided = [self._decide(chunk, existing, horizon) for chunk in chunks]
            upserts = []
            with connection.pipeline():
                # Every chunk sent before any result is read: the server writes one chunk
                # while this process encodes the next, and a keyless defer is one round trip.
                for chunk, decision in zip(chunks, decided, strict=True):
                    keyless = all(item.keyless for _, item, _ in chunk)
                    statement = "insert_schedules" if keyless else "upsert_schedules"
                    upserts.append((chunk, self._send_chunk(connection, decision, now, statement)))
                self._notify(connection)
                if within is None:
                    connection.execute(self._sql["commit"])
            saved: dict[int, Schedule] = {}
            for chunk, upsert in upserts:
                values = {(row["tenant"], row["key"]): row for row in upsert.fetchall()}
                for index, item, p in chunk:
                    saved[index] = saving.saved(values[p["tenant"], p["key"]], item)
        return [saved[n] for n in range(len(batch))]

    def _locked_to_save(
        self,
        connection: Connection,
        batch: Sequence[Saving],
        params: Sequence[dict[str, Any]],
        order: Sequence[int],
    ) -> tuple[dict[tuple[str, str], Row], datetime | None]:
        """The stored rows of the keyed items of ``batch``, locked in ``order``, and the history
        horizon; one round trip for the whole batch, none when every item is keyless."""
        # A keyless one-off has a new random key: nothing can be stored under it yet.
        keyed = [params[n] for n in order if not batch[n].keyless]
        existing: dict[tuple[str, str], Row] = {}
        horizon: datetime | None = None
        if keyed:
            locks = {"tenants": [p["tenant"] for p in keyed], "keys": [p["key"] for p in keyed]}
            for row in self._rows(connection, "lock_schedules_to_save", locks):
                existing[row["tenant"], row["key"]] = row
                horizon = row["horizon"]
        return existing, horizon

    def _saved_if_new(
        self, connection: Connection, item: Saving, params: dict[str, Any], now: datetime
    ) -> Schedule | None:
        """``item`` saved and committed in one round trip if its key is stored nowhere; else
        None, nothing written, and ``connection`` in no transaction."""
        decision = self._decide([(0, item, params)], {}, None)
        try:
            with connection.pipeline():
                inserted = self._send_chunk(connection, decision, now, "insert_schedules")
                self._notify(connection)
                connection.execute(self._sql["commit"])
        except psycopg.errors.UniqueViolation:
            connection.rollback()  # and its NOTIFY with it: the save that follows sends one
            return None
        row = inserted.fetchone()
        assert row is not None
        return saving.saved(row, item)

    def _send_chunk(
        self, connection: Connection, decision: Decision, now: datetime, statement: str
    ) -> psycopg.Cursor[dict[str, Any]]:
        """Send the statements that save one chunk of a batch as `_decide` decided it, by
        ``statement`` (upsert_schedules, or insert_schedules for keys stored nowhere), in the
        open pipeline; the cursor returns the saved rows once the pipeline ends."""
        decided, planned, replaced_ids = decision
        rows = [{**row, "next_run_at": _iso(row["next_run_at"]), "now": None} for row in decided]
        occurrences = saving.saved_occurrences(planned, datetime.isoformat)
        if replaced_ids:
            supersede = {"ids": self._ints(replaced_ids), "reason": saving.SUPERSEDED}
            connection.execute(self._sql["supersede_pending"], supersede)
        upsert = self._cursor_on(connection)
        upserting = {"rows": json.dumps(rows), "occurrences": json.dumps(occurrences), "now": now}
        upsert.execute(self._sql[statement], upserting)
        return upsert

    def materialise_many(self, batch: Sequence[Materialisation], now: datetime) -> Materialised:
        if not batch:
            return Materialised()
        return self._inserting(lambda: self._materialise_many(batch, now))

    def _materialise_many(self, batch: Sequence[Materialisation], now: datetime) -> Materialised:
        # Before the transaction reads any occurrence: it would not see a day's partition made
        # after that (see PostgresPartitions._inserting).
        self._before_inserting(p.instance.at for item in batch for p in item.planned)
        with self._connect() as connection:
            wanted = {
                "tenants": [tenant_column(item.tenant) for item in batch],
                "keys": [item.key for item in batch],
                "expected": [item.expected_next_run_at for item in batch],
            }
            locked = {
                (row["tenant"], row["key"])
                for row in self._rows(connection, "lock_schedules_to_materialise", wanted)
            }
            mine = [item for item in batch if (tenant_column(item.tenant), item.key) in locked]
            if not mine:
                return Materialised()
            # Three pipelined round trips for the whole batch, not three per schedule: a
            # thousand schedules due on one second took a worker most of that second.
            advance = [
                {
                    "tenant": tenant_column(item.tenant),
                    "key": item.key,
                    "expected": item.expected_next_run_at,
                    "next_run_at": item.next_run_at,
                    "now": now,
                }
                for item in mine
            ]
            advanced = [
                (item, row["id"], row["job"])
                for item, row in zip(mine, _each_row(connection, self._sql["advance_schedule"],
                                                     advance), strict=True)
                if row is not None and item.planned
            ]  # fmt: skip
            stale = [(i, sid, job) for i, sid, job in advanced if i.stale_before is not None]
            superseded: list[Row] = []
            if stale:
                superseding = {
                    "ids": self._ints(sid for _, sid, _ in stale),
                    "befores": [item.stale_before for item, _, _ in stale],
                    "reasons": [item.stale_reason for item, _, _ in stale],
                    "now": now,
                }
                superseded = self._rows(connection, "supersede_stale", superseding)
            job_of = {sid: job for _, sid, job in stale}
            skipped = [
                Skipped(job_of[row["schedule_id"]], "misfire")
                for row in superseded
                for _ in range(row["superseded"])
            ]
            serial = [sid for item, sid, _ in advanced if item.overlap != "allow"]
            counts: dict[int, Row] = {}
            if serial:
                waiting = self._rows(connection, "in_progress", {"ids": self._ints(serial)})
                counts = {row["schedule_id"]: row for row in waiting}
            rows, jobs = [], []
            for item, schedule_id, job in advanced:
                planned = item.planned
                found = counts.get(schedule_id)
                if found is not None:
                    planned = claiming.with_overlap(
                        planned, item.overlap, found["waiting"], found["running"], now
                    )
                stored_tenant = tenant_column(item.tenant)
                rows += [occurrence_params(schedule_id, stored_tenant, p, now) for p in planned]
                jobs += [job] * len(planned)
            # One result per row, in the same pipelined round trip: only what this worker wrote
            # counts (another may have written the same occurrence first).
            written = _each_row(connection, self._sql["insert_occurrence"], rows)
            skipped += [
                Skipped(job, skip_cause(row["reason"] or ""))
                for job, row in zip(jobs, written, strict=True)
                if row is not None and row["status"] == "skipped"
            ]
            return Materialised(sum(row is not None for row in written), skipped)

    def mark_invalid(
        self, schedules: Sequence[tuple[str | None, str, str]], now: datetime
    ) -> list[tuple[str | None, str]]:
        if not schedules:
            return []
        params = {
            "tenants": [tenant_column(tenant) for tenant, _, _ in schedules],
            "keys": [key for _, key, _ in schedules],
            "reasons": [reason for _, _, reason in schedules],
            "now": now,
        }
        return self._inserting(lambda: self._mark_invalid(params, now))

    def _mark_invalid(self, params: dict[str, Any], now: datetime) -> list[tuple[str | None, str]]:
        with self._connect() as connection:
            stopped = self._rows(connection, "mark_invalid", params)
            invalid = [
                claiming.invalid_occurrence_params(
                    row["id"], row["tenant"], row["stopped_at"], row["reason"], now
                )
                for row in stopped
                if row["stopped_at"] is not None
            ]
            self._before_inserting(row["scheduled_for"] for row in invalid)
            self._changed_each(connection, "insert_occurrence", invalid)
        found = sorted((row["tenant"], row["key"]) for row in stopped)
        return [(records.tenant_of(tenant), key) for tenant, key in found]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _each_row(
    connection: Connection, query: str, params: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any] | None]:
    """The first row (or None) of ``query`` run once per item of ``params``, pipelined."""
    if not params:
        return []
    with connection.cursor() as cursor:
        cursor.executemany(query, params, returning=True)
        found = []
        while True:
            found.append(cursor.fetchone())
            if not cursor.nextset():
                return found
