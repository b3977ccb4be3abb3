"""The production store: PostgreSQL through psycopg 3, with a connection pool."""

from __future__ import annotations

import json
import logging
import os
import select
import threading
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool, PoolTimeout

from oncely.errors import ConfigurationError, OncelyError, StoreError, StoreUnavailable
from oncely.model import (
    Abandoned,
    Action,
    Claim,
    CodeVersion,
    Failure,
    Lease,
    Materialisation,
    Occurrence,
    OccurrenceStatus,
    Planned,
    Reclaimed,
    Saving,
    Schedule,
    ScheduleStatus,
    Sweep,
    WorkerBeat,
)
from oncely.recurrence import At
from oncely.store import claiming, housekeeping, payloads, records
from oncely.store.interface import Store, Watch
from oncely.store.listener import Listener
from oncely.store.queries import migrations, queries
from oncely.store.records import (
    SAVE_CHUNK,
    known,
    occurrence_params,
    tenant_column,
    unknown_schedule,
)

# How long a call waits for a connection, and a connection attempt for the server, before the
# store says it is unavailable: the worker must hear of an outage in seconds, not hang in it.
_TIMEOUT_S = 5
# The change watch's connection idles between notices; keepalives notice a server that vanished
# without closing it (a cut network), which would otherwise leave the watch waiting forever.
_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 60,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}

Connection = psycopg.Connection[dict[str, Any]]

_POOL_NAME = "oncely"


def _decode_safely(connection: Connection) -> None:
    """Decode jsonb (payloads, trigger specs) with `payloads.decode`: a stored value too deep for
    this process's recursion room raised RecursionError from every read of its row."""
    set_json_loads(payloads.decode, connection)


class _OwnPoolWarnings(logging.Filter):
    """Drops psycopg_pool's warnings about oncely's own pool; others' pools are left alone.

    While the server is down the pool warned of every failed connection attempt, several a
    second, against lesson 10's one line per 30 repeats: the worker reports the outage itself.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not isinstance(record.args, tuple):
            return True
        for arg in record.args:
            pool = getattr(arg, "_pool", None) or getattr(arg, "pool", None)
            if arg == _POOL_NAME or getattr(pool, "name", None) == _POOL_NAME:
                return False
        return True


logging.getLogger("psycopg.pool").addFilter(_OwnPoolWarnings())


class PostgresStore(Store):
    """A store in one PostgreSQL database; any number of workers on any machines may share it.

    Connections come from a pool of at most ``max_size``, opened on first use, in the process
    that uses it: a pool inherited across ``fork`` (gunicorn's preload) would share sockets
    between processes. Through an outage (a server restart, cut connections) a call fails within
    about 5 s with `StoreUnavailable`, and once the server is back the next call succeeds on the
    same store: connections the server closed are never handed out.
    """

    dialect = "postgres"

    def __init__(self, conninfo: str, max_size: int = 8) -> None:
        self.conninfo = conninfo
        self.max_size = max_size
        self._sql = queries("postgres")
        self._pool: ConnectionPool[Connection] | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()
        self._own_identity: tuple[Any, ...] | None = None

    def _where(self) -> str:
        """``user@host:port/dbname`` of the conninfo, for messages: never its password."""
        try:
            parts = conninfo_to_dict(self.conninfo)
        except psycopg.Error:
            return "(an unreadable conninfo)"
        user = f"{parts['user']}@" if parts.get("user") else ""
        port = f":{parts['port']}" if parts.get("port") else ""
        return f"{user}{parts.get('host') or 'localhost'}{port}/{parts.get('dbname') or ''}"

    def _probe(self) -> None:
        """Connect once, directly, before the pool opens: a database that cannot be reached
        fails the first call at once, with psycopg's reason. Through the pool it failed after
        the pool's 5 s wait with "couldn't get a connection after 5.00 sec", whatever the cause
        (no such database, connection refused, a wrong password)."""
        try:
            psycopg.connect(self.conninfo, connect_timeout=_TIMEOUT_S, autocommit=True).close()
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {self._where()}: {reason}"
            ) from exc

    def _opened_pool(self) -> ConnectionPool[Connection]:
        with self._pool_lock:
            if self._pool is None or self._pool_pid != os.getpid():
                self._probe()
                check = _IdleCheck()
                self._pool = ConnectionPool(
                    self.conninfo,
                    min_size=1,
                    max_size=self.max_size,
                    open=False,
                    timeout=_TIMEOUT_S,
                    # The pool retries a failed connection attempt with a backoff that grows to
                    # minutes; a call made once the server is back waited out that backoff and
                    # failed. Giving up after one call's wait lets the next call try at once.
                    reconnect_timeout=_TIMEOUT_S,
                    check=check,
                    kwargs={"connect_timeout": _TIMEOUT_S, "row_factory": dict_row},
                    configure=_decode_safely,
                    name=_POOL_NAME,
                )
                check.pool = weakref.ref(self._pool)
                self._pool.open(wait=False)
                self._pool_pid = os.getpid()
            return self._pool

    def reserve(self, users: int) -> None:
        with self._pool_lock:
            if users <= self.max_size:
                return
            self.max_size = users
            if self._pool is not None and self._pool_pid == os.getpid():
                self._pool.resize(min_size=self._pool.min_size, max_size=users)

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        """A pooled connection in one transaction: committed at the end, rolled back on error."""
        try:
            with self._opened_pool().connection() as connection:
                yield connection
        except PoolTimeout as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {self._where()}: {exc} (the server was "
                "reachable before; it is restarting, refusing connections, or cut off)"
            ) from exc
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL refused: {exc}") from exc

    def migrate(self, now: datetime) -> list[int]:
        applied: list[int] = []
        with self._connect() as connection:
            connection.execute(self._sql["lock_migrations"])
            connection.execute(self._sql["create_migrations_table"])
            seen = {row["version"] for row in connection.execute(self._sql["applied_versions"])}
            for migration in migrations("postgres"):
                if migration.version in seen:
                    continue
                connection.execute(migration.sql.encode())
                connection.execute(
                    self._sql["record_migration"],
                    {"version": migration.version, "name": migration.name, "applied_at": now},
                )
                applied.append(migration.version)
        return applied

    def schema_version(self) -> int:
        with self._connect() as connection:
            exists = connection.execute(self._sql["migrations_table_exists"]).fetchone()
            if exists is None or exists["count"] == 0:
                return 0
            rows = connection.execute(self._sql["applied_versions"]).fetchall()
        return max((row["version"] for row in rows), default=0)

    def save_schedules(
        self, batch: Sequence[Saving], now: datetime, *, within: Any = None
    ) -> list[Schedule]:
        if not batch:
            return []
        params = records.batch_params(batch, now)
        # Written in (tenant, key) order, the whole batch across its chunks: two batches of the
        # same new keys in opposite orders each took half of them and deadlocked on the rest.
        order = sorted(range(len(batch)), key=lambda n: (params[n]["tenant"], params[n]["key"]))
        saved: dict[int, Schedule] = {}
        with self._session(within) as (connection, own):
            cursor = self._cursor(connection, own)
            for start in range(0, len(order), SAVE_CHUNK):
                last = start + SAVE_CHUNK >= len(order)
                chunk = [(n, batch[n], params[n]) for n in order[start : start + SAVE_CHUNK]]
                saved.update(
                    self._save_chunk(
                        connection,
                        cursor,
                        chunk,
                        now,
                        finish="commit" if own and last else "notify" if last else None,
                    )
                )
        return [saved[n] for n in range(len(batch))]

    def _save_chunk(
        self,
        connection: Connection,
        cursor: psycopg.Cursor[dict[str, Any]],
        chunk: Sequence[tuple[int, Saving, dict[str, Any]]],
        now: datetime,
        finish: str | None,
    ) -> dict[int, Schedule]:
        """Save one chunk of a batch, (index in the batch, item, params) each; ``finish``
        "notify" sends the batch's NOTIFY after it, "commit" also commits."""
        keyed = [p for _, item, p in chunk if not item.keyless]
        existing: dict[tuple[str, str], dict[str, Any]] = {}
        horizon: datetime | None = None
        if keyed:
            # A keyless one-off has a new random key: nothing can be stored under it yet.
            locks = {"tenants": [p["tenant"] for p in keyed], "keys": [p["key"] for p in keyed]}
            for row in cursor.execute(self._sql["lock_schedules_to_save"], locks).fetchall():
                existing[row["tenant"], row["key"]] = row
                horizon = row["horizon"]
        rows, occurrences, replaced_ids = [], [], []
        for index, item, item_params in chunk:
            found = existing.get((item_params["tenant"], item_params["key"]))
            try:
                decided, replaced = records.save_params(found, item_params)
                if item.guard_horizon and isinstance(item.trigger, At):
                    records.refuse_before_horizon(found, decided, item.trigger.when, horizon)
            except OncelyError as exc:
                exc.item = index
                raise
            if replaced:
                assert found is not None
                replaced_ids.append(found["id"])
            if item.occurrences and (found is None or replaced):
                occurrences += [
                    records.saved_occurrence(decided, p, datetime.isoformat)
                    for p in item.occurrences
                ]
            next_run_at = decided["next_run_at"]
            rows.append(
                {
                    **decided,
                    "next_run_at": None if next_run_at is None else next_run_at.isoformat(),
                    "now": None,
                }
            )
        with connection.pipeline():
            # Pipelined and never waited for in between: a keyless defer is one round trip.
            if replaced_ids:
                supersede = {"ids": _bigint_array(replaced_ids), "reason": records.SUPERSEDED}
                connection.execute(self._sql["supersede_pending"], supersede)
            upsert = self._cursor(connection, False)
            saving = {"rows": json.dumps(rows), "occurrences": json.dumps(occurrences), "now": now}
            upsert.execute(self._sql["upsert_schedules"], saving)
            if finish is not None:
                connection.execute(self._sql["notify_change"])
            if finish == "commit":
                connection.execute(self._sql["commit"])
        values = {(row["tenant"], row["key"]): row for row in upsert.fetchall()}
        return {
            index: records.saved(values[p["tenant"], p["key"]], item) for index, item, p in chunk
        }

    @contextmanager
    def _session(self, within: Any) -> Iterator[tuple[Connection, bool]]:
        """The connection of one operation and whether it is the store's own: a pooled one in
        a transaction of its own, or ``within``, the caller's, in the caller's transaction,
        never committed here."""
        if within is None:
            with self._connect() as connection:
                yield connection, True
            return
        connection = self._adopted(within)
        try:
            yield connection, False
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL refused: {exc}") from exc

    def _cursor(self, connection: Connection, own: bool) -> psycopg.Cursor[dict[str, Any]]:
        """A cursor reading rows as the store does, also on a caller's connection (whose row
        factory and JSON loader are the caller's, and stay so)."""
        cursor = connection.cursor(row_factory=dict_row)
        if not own:
            _decode_safely_on(cursor)
        return cursor

    def _adopted(self, within: Any) -> Connection:
        """``within``, a caller's psycopg connection, once it is known to be in a transaction on
        this store's database; else `ConfigurationError` saying what is wrong."""
        if not isinstance(within, psycopg.Connection):
            raise ConfigurationError(
                f"connection={within!r} is not a psycopg connection, and this app's database is "
                "PostgreSQL; pass a psycopg 3 connection (or cursor), a SQLAlchemy Connection or "
                "Session, or Django's connection, open on the app's database"
            )
        status = within.info.transaction_status
        if status == TransactionStatus.INERROR:
            raise ConfigurationError(
                "connection= is in a failed transaction; roll it back before scheduling on it"
            )
        if within.closed or status == TransactionStatus.UNKNOWN:
            raise ConfigurationError("connection= is closed; pass an open connection")
        if status == TransactionStatus.IDLE and within.autocommit:
            # Each statement would commit on its own: a rollback of the caller's could not
            # take the timer back.
            raise ConfigurationError(
                "connection= is in autocommit mode and in no transaction, so oncely's writes "
                "would commit on their own; open one first (with connection.transaction(): ...)"
            )
        theirs = _identities.get(within)
        if theirs is None:
            theirs = _identities[within] = _identity(within)
        if theirs != self._identity():
            raise ConfigurationError(
                f"connection= is on database {theirs[0]!r} (server port {theirs[2]}, schema "
                f"{theirs[3]!r}), not on this app's ({self._identity()[0]!r}, port "
                f"{self._identity()[2]}, schema {self._identity()[3]!r}): oncely writes its "
                "timers only on its own database; pass a connection to that one"
            )
        return within

    def _identity(self) -> tuple[Any, ...]:
        if self._own_identity is None:
            with self._connect() as connection:
                self._own_identity = _identity(connection)
        return self._own_identity

    def get_schedule(self, tenant: str | None, key: str, *, within: Any = None) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key}
        with self._session(within) as (connection, own):
            row = self._cursor(connection, own).execute(self._sql["select_schedule"], params)
            found = row.fetchone()
        return known(None if found is None else records.schedule(found), tenant, key)

    def list_schedules(
        self,
        tenant: str | None,
        *,
        all_tenants: bool = False,
        job: str | None = None,
        status: ScheduleStatus | None = None,
        prefix: str | None = None,
        after: tuple[str | None, str] | None = None,
        limit: int | None = None,
    ) -> list[Schedule]:
        params = records.listing_params(tenant, all_tenants, job, status, prefix, after, limit)
        with self._connect() as connection:
            rows = connection.execute(self._sql["select_schedules"], params)
            return [records.schedule(row) for row in rows.fetchall()]

    def code_schedule_keys(self) -> list[str]:
        with self._connect() as connection:
            rows = connection.execute(
                self._sql["code_schedule_keys"], {"tenant": tenant_column(None)}
            ).fetchall()
        return [row["key"] for row in rows]

    def set_paused(
        self,
        tenant: str | None,
        key: str,
        paused: bool,
        now: datetime,
        *,
        until: datetime | None = None,
        within: Any = None,
    ) -> Schedule:
        params = {
            "tenant": tenant_column(tenant), "key": key, "paused": paused, "now": now,
            "until": until if paused else None,
        }  # fmt: skip
        with self._session(within) as (connection, own):
            cursor = self._cursor(connection, own)
            row = cursor.execute(self._sql["set_paused"], params).fetchone()
            # A pause's end is a wake-up time too: a worker asleep past it would resume late.
            if row is not None and (not paused or until is not None):
                cursor.execute(self._sql["notify_change"])
        return known(None if row is None else records.schedule(row), tenant, key)

    def resume_ended_pauses(self, now: datetime, actor: str, limit: int = 100) -> list[Action]:
        with self._connect() as connection:
            ended = connection.execute(
                self._sql["lock_ended_pauses"], {"now": now, "limit": limit}
            ).fetchall()
            if not ended:
                return []
            resumed = [records.pause_ended(row, now, actor) for row in ended]
            with connection.cursor() as cursor:
                cursor.executemany(
                    self._sql["end_pause"], [{"id": row["id"], "now": now} for row in ended]
                )
                cursor.executemany(
                    self._sql["insert_action"],
                    [housekeeping.action_params(action) for action in resumed],
                )
            connection.execute(self._sql["notify_change"])
        return resumed

    def remove_schedule(
        self, tenant: str | None, key: str, now: datetime, *, within: Any = None
    ) -> Schedule:
        params = {"tenant": tenant_column(tenant), "key": key, "now": now}
        with self._session(within) as (connection, own):
            cursor = self._cursor(connection, own)
            # The schedule before its occurrences, as save_schedules locks them: the other order
            # deadlocked a removal with a concurrent save of the same key.
            cursor.execute(self._sql["lock_schedule"], params)
            cursor.execute(self._sql["skip_waiting"], {**params, "reason": records.REMOVED})
            row = cursor.execute(self._sql["remove_schedule"], params).fetchone()
        return known(None if row is None else records.schedule(row), tenant, key)

    def materialise_many(self, batch: Sequence[Materialisation], now: datetime) -> int:
        if not batch:
            return 0
        with self._connect() as connection:
            locked = {
                (row["tenant"], row["key"])
                for row in connection.execute(
                    self._sql["lock_schedules_to_materialise"],
                    {
                        "tenants": [tenant_column(item.tenant) for item in batch],
                        "keys": [item.key for item in batch],
                    },
                )
            }
            mine = [item for item in batch if (tenant_column(item.tenant), item.key) in locked]
            if not mine:
                return 0
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
                (item, row["id"])
                for item, row in zip(mine, _each_row(connection, self._sql["advance_schedule"],
                                                     advance), strict=True)
                if row is not None and item.planned
            ]  # fmt: skip
            stale = [
                {"schedule_id": sid, "before": item.stale_before, "reason": item.stale_reason,
                 "now": now}
                for item, sid in advanced
                if item.stale_before is not None
            ]  # fmt: skip
            if stale:
                connection.cursor().executemany(self._sql["supersede_stale"], stale)
            serial = [(item, sid) for item, sid in advanced if item.overlap != "allow"]
            counts = dict(
                zip(
                    (sid for _, sid in serial),
                    _each_row(
                        connection,
                        self._sql["in_progress"],
                        [{"schedule_id": sid} for _, sid in serial],
                    ),
                    strict=True,
                )
            )
            rows = []
            for item, schedule_id in advanced:
                planned = item.planned
                found = counts.get(schedule_id)
                if found is not None:
                    planned = claiming.with_overlap(
                        planned, item.overlap, found["waiting"], found["running"], now
                    )
                stored_tenant = tenant_column(item.tenant)
                rows += [occurrence_params(schedule_id, stored_tenant, p, now) for p in planned]
            if not rows:
                return 0
            with connection.cursor() as cursor:
                cursor.executemany(self._sql["insert_occurrence"], rows)
                return cursor.rowcount

    def add_occurrences(
        self,
        tenant: str | None,
        key: str,
        planned: Sequence[Planned],
        *,
        now: datetime,
        rearm_skipped: bool = False,
        within: Any = None,
    ) -> int:
        stored_tenant = tenant_column(tenant)
        with self._session(within) as (connection, own):
            found = (
                self._cursor(connection, own)
                .execute(self._sql["schedule_id"], {"tenant": stored_tenant, "key": key})
                .fetchone()
            )
            if found is None:
                raise unknown_schedule(tenant, key)
            schedule_id = found["id"]
            rows = [occurrence_params(schedule_id, stored_tenant, p, now) for p in planned]
            added = 0
            with connection.cursor() as cursor:
                if rows:
                    cursor.executemany(self._sql["insert_occurrence"], rows)
                    added = cursor.rowcount
                if rearm_skipped and planned:
                    rearm = [
                        {"schedule_id": schedule_id, "scheduled_for": p.instance.at, "now": now}
                        for p in planned
                    ]
                    cursor.executemany(self._sql["rearm_skipped"], rearm)
                    added += cursor.rowcount
            if added > 0:
                connection.execute(self._sql["notify_change"])
        return max(added, 0)

    def due_schedules(self, now: datetime, jobs: Collection[str], limit: int) -> list[Schedule]:
        # The limit is written into the statement, not bound: PostgreSQL costed the generic plan
        # for an unknown limit (a tenth of the table), so from some tens of thousands of
        # schedules on it planned the prepared query anew on every tick, and an idle tick took
        # longer the more schedules were stored. The engine asks with one limit: one statement.
        query = self._sql["due_schedules"].replace("%(limit)s", str(int(limit)))
        params = {"now": now, "jobs": sorted(jobs)}
        with self._connect() as connection:
            rows = connection.execute(query, params).fetchall()
        return [records.schedule(row) for row in rows]

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
        with self._connect() as connection:
            stopped = connection.execute(self._sql["mark_invalid"], params).fetchall()
            invalid = [
                claiming.invalid_occurrence_params(
                    row["id"], row["tenant"], row["stopped_at"], row["reason"], now
                )
                for row in stopped
                if row["stopped_at"] is not None
            ]
            if invalid:
                with connection.cursor() as cursor:
                    cursor.executemany(self._sql["insert_occurrence"], invalid)
        found = sorted((row["tenant"], row["key"]) for row in stopped)
        return [(records.tenant_of(tenant), key) for tenant, key in found]

    def claim_due(
        self,
        *,
        owner: str,
        lease: timedelta,
        limit: int,
        now: datetime,
        jobs: Collection[str],
        reclaim: Collection[str],
        serial: Collection[str],
        due_by: datetime | None = None,
        skip: Collection[str] = (),
    ) -> list[Claim]:
        if limit <= 0 or not jobs:
            return []
        due = now if due_by is None else max(due_by, now)
        free = sorted(set(jobs) - set(serial))
        serial_jobs = sorted(set(jobs) & set(serial))
        until = now + lease
        with self._connect() as connection:
            connection.execute(self._sql["prefer_ordered_scans"])
            claims = self._claim_locked(
                connection, owner, until, limit, now, due, reclaim, serial_jobs, skip
            )
            if free and len(claims) < limit:
                params = {
                    "jobs": free,
                    "limit": limit - len(claims),
                    "owner": owner,
                    "until": until,
                    "now": now,
                    "due_by": due,
                }
                rows = connection.execute(self._sql["claim_free"], params).fetchall()
                claims += sorted(
                    (claiming.claim(row, ()) for row in rows),
                    key=lambda c: (c.scheduled_for, c.occurrence_id),
                )
        return claims

    def _claim_locked(
        self,
        connection: Connection,
        owner: str,
        until: datetime,
        limit: int,
        now: datetime,
        due: datetime,
        reclaim: Collection[str],
        serial_jobs: Collection[str],
        skip: Collection[str],
    ) -> list[Claim]:
        """Claim expired leases to rerun and occurrences of serial jobs, schedules locked."""

        def read(seen: Sequence[int], first: bool) -> tuple[list[claiming.Candidate], bool]:
            exclude = _bigint_array(seen)
            ready = self._candidates(
                connection, "claim_ready", serial_jobs, now, due, limit, False, exclude
            )
            expired = []
            if first:
                expired = self._candidates(
                    connection, "claim_expired", reclaim, now, now, limit, True
                )
            return [*expired, *ready], len(ready) < limit

        def settle(
            candidates: list[claiming.Candidate], fresh: list[int]
        ) -> tuple[list[claiming.Candidate], set[int]]:
            ids = _bigint_array(fresh)
            locked = {
                row["id"] for row in connection.execute(self._sql["lock_schedules"], {"ids": ids})
            }
            candidates = [c for c in candidates if c.schedule_id in locked]
            busy: set[int] = set()
            if any(c.job in serial_jobs for c in candidates):
                busy = {
                    row["schedule_id"]
                    for row in connection.execute(
                        self._sql["busy_schedules"], {"ids": ids, "now": now}
                    )
                }
            overlapped = claiming.overlapped(candidates, skip, busy, now)
            if overlapped:
                connection.execute(
                    self._sql["skip_overlapped"],
                    {
                        "ids": _bigint_array(c.occurrence_id for c in overlapped),
                        "reason": claiming.OVERLAP_SKIP_REASON,
                        "now": now,
                    },
                )
            return candidates, busy

        admitted = claiming.admit_in_rounds(limit, serial_jobs, read, settle)
        if not admitted:
            return []
        taken = connection.execute(self._sql["take_fences"], {"count": len(admitted)})
        fences = _bigint_array(row["fence"] for row in taken)
        ids = _bigint_array(c.occurrence_id for c in admitted)
        connection.execute(
            self._sql["start_attempts"],
            {"ids": ids, "fences": fences, "owner": owner, "until": until, "now": now},
        )
        reclaimed = {c.occurrence_id for c in admitted if c.reclaimed}
        rows = connection.execute(self._sql["select_claimed"], {"ids": ids})
        return [claiming.claim(row, reclaimed) for row in rows.fetchall()]

    def _candidates(
        self,
        connection: Connection,
        name: str,
        jobs: Collection[str],
        now: datetime,
        due: datetime,
        limit: int,
        reclaimed: bool,
        exclude: str = "{}",
    ) -> list[claiming.Candidate]:
        if not jobs:
            return []
        params = {
            "now": now,
            "due_by": due,
            "jobs": sorted(jobs),
            "limit": limit,
            "exclude": exclude,
        }
        return [
            claiming.Candidate(
                row["id"],
                row["schedule_id"],
                row["job"],
                reclaimed,
                ahead=bool(row.get("ahead")),
                run_after=row.get("run_after"),
            )
            for row in connection.execute(self._sql[name], params)
        ]

    def abandon_expired(
        self, *, now: datetime, jobs: Collection[str], reason: str
    ) -> list[Abandoned]:
        if not jobs:
            return []
        with self._connect() as connection:
            found = connection.execute(
                self._sql["expired_of_jobs"], {"now": now, "jobs": sorted(jobs)}
            ).fetchall()
            if found:
                connection.cursor().executemany(
                    self._sql["abandon"],
                    [
                        {"id": row["id"], "fence": row["fence"], "now": now, "reason": reason}
                        for row in found
                    ],
                )
        return [records.abandoned(row) for row in found]

    def extend_leases(self, leases: Sequence[tuple[Claim, datetime]]) -> set[int]:
        if not leases:
            return set()
        params = {
            "ids": _bigint_array(c.occurrence_id for c, _ in leases),
            "fences": _bigint_array(c.fence for c, _ in leases),
            "untils": [until for _, until in leases],
        }
        with self._connect() as connection:
            # Not prepared, as book_success: a generic plan for the arrays read every running row.
            rows = connection.execute(self._sql["extend_leases"], params, prepare=False)
            return {row["id"] for row in rows.fetchall()}

    def book_success(
        self, claims: Sequence[Claim], now: datetime, *, within: Any = None
    ) -> list[Claim]:
        if not claims:
            return []
        if within is not None:
            return self._book_success(within, claims, now)
        with self._connect() as connection:
            return self._book_success(connection, claims, now)

    def _book_success(
        self, connection: Connection, claims: Sequence[Claim], now: datetime
    ) -> list[Claim]:
        params = {
            "ids": _bigint_array(c.occurrence_id for c in claims),
            "fences": _bigint_array(c.fence for c in claims),
            "now": now,
        }
        # Planned for these arrays every time, never prepared: statistics taken while nothing
        # ran say "no running rows", and the generic plan psycopg's prepared statement gets
        # after five runs then read every running row once per booked one (10 ms for 30 rows
        # with 1,100 running; a burst's booking took 60% of the worker's loop).
        with connection.pipeline():  # the notice rides in the booking's round trip
            cursor = connection.execute(self._sql["book_success"], params, prepare=False)
            connection.execute(self._sql["notify_outcome"])
        booked = {row["id"] for row in cursor.fetchall()}
        done = [c for c in claims if c.occurrence_id in booked]
        streaks = sorted({c.schedule_id for c in done if c.failure_streak})
        if streaks:
            connection.execute(self._sql["reset_failures"], {"ids": _bigint_array(streaks)})
        return done

    def book_skipped(self, claim: Claim, now: datetime, reason: str) -> bool:
        params = {"id": claim.occurrence_id, "fence": claim.fence, "now": now, "reason": reason}
        with self._connect() as connection, connection.pipeline():
            cursor = connection.execute(self._sql["book_skipped"], params)
            connection.execute(self._sql["notify_outcome"])
        return cursor.fetchone() is not None

    def book_failure(
        self,
        claim: Claim,
        now: datetime,
        *,
        error: str,
        retry_at: datetime | None,
        pause_after: int | None,
    ) -> Failure:
        params = {"id": claim.occurrence_id, "fence": claim.fence, "now": now, "error": error}
        with self._connect() as connection:
            if retry_at is not None:
                retried = connection.execute(
                    self._sql["book_retry"], {**params, "retry_at": retry_at}
                ).fetchone()
                if retried is not None:
                    # The retry comes due sooner than a sleeping worker's next wake-up may be
                    # (the dashboard hears this notice too: no outcome notice besides).
                    connection.execute(self._sql["notify_change"])
                return Failure(booked=retried is not None, final=False)
            failed = connection.execute(self._sql["book_failed"], params).fetchone()
            if failed is None:
                return Failure(booked=False, final=True)
            count = {"schedule_id": failed["schedule_id"], "pause_after": pause_after, "now": now}
            with connection.pipeline():
                cursor = connection.execute(self._sql["count_failure"], count)
                connection.execute(self._sql["notify_outcome"])
            counted = cursor.fetchone()
        assert counted is not None
        return Failure(
            booked=True,
            final=True,
            consecutive_failures=counted["consecutive_failures"],
            paused=counted["paused"],
        )

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self._connect() as connection:
            set_json_loads(json.loads, connection)  # the caller's own queries decode as psycopg's
            try:
                yield connection
            finally:
                _decode_safely(connection)

    def next_due_at(
        self, jobs: Collection[str] | None = None, *, after: datetime | None = None
    ) -> datetime | None:
        params = {"jobs": None if jobs is None else sorted(jobs), "after": after}
        with self._connect() as connection:
            schedule = connection.execute(self._sql["next_schedule_due"], params).fetchone()
            occurrence = connection.execute(self._sql["next_occurrence_due"], params).fetchone()
        due = [
            row["min"].astimezone(UTC)
            for row in (schedule, occurrence)
            if row is not None and row["min"] is not None
        ]
        return min(due, default=None)

    def history(
        self,
        tenant: str | None,
        *,
        key: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        status: OccurrenceStatus | None = None,
        limit: int = 100,
        all_tenants: bool = False,
    ) -> list[Occurrence]:
        params = {
            "tenant": tenant_column(tenant),
            "all_tenants": all_tenants,
            "key": key,
            "since": since,
            "until": until,
            "status": status,
            "limit": limit,
        }
        with self._connect() as connection:
            rows = connection.execute(self._sql["select_history"], params).fetchall()
        return [records.occurrence(row) for row in rows]

    def acquire_lease(self, name: str, owner: str, ttl: timedelta, now: datetime) -> Lease | None:
        params = {"name": name, "owner": owner, "until": now + ttl, "now": now}
        with self._connect() as connection:
            row = connection.execute(self._sql["acquire_lease"], params).fetchone()
        return None if row is None else housekeeping.lease(row)

    def renew_lease(self, lease: Lease, until: datetime) -> Lease | None:
        params = {**housekeeping.lease_params(lease), "until": until}
        with self._connect() as connection:
            row = connection.execute(self._sql["renew_lease"], params).fetchone()
        return None if row is None else housekeeping.lease(row)

    def release_lease(self, lease: Lease) -> bool:
        params = housekeeping.lease_params(lease)
        with self._connect() as connection:
            return connection.execute(self._sql["release_lease"], params).fetchone() is not None

    def lease_holder(self, name: str, now: datetime) -> Lease | None:
        with self._connect() as connection:
            row = connection.execute(
                self._sql["lease_holder"], {"name": name, "now": now}
            ).fetchone()
        return None if row is None else housekeeping.lease(row)

    def see_code_version(
        self, fingerprint: str, now: datetime
    ) -> tuple[CodeVersion, CodeVersion | None]:
        params = {"fingerprint": fingerprint, "now": now}
        with self._connect() as connection:
            mine = connection.execute(self._sql["see_code_version"], params).fetchone()
            applied = connection.execute(self._sql["applied_code_version"]).fetchone()
        assert mine is not None
        return CodeVersion(**mine), None if applied is None else CodeVersion(**applied)

    def mark_code_applied(self, fingerprint: str, now: datetime) -> None:
        with self._connect() as connection:
            connection.execute(
                self._sql["mark_code_applied"], {"fingerprint": fingerprint, "now": now}
            )

    def database_now(self) -> datetime | None:
        with self._connect() as connection:
            row = connection.execute(self._sql["database_now"]).fetchone()
        assert row is not None
        now: datetime = row["now"]
        return now.astimezone(UTC)

    def beat(self, worker: WorkerBeat) -> None:
        with self._connect() as connection:
            connection.execute(self._sql["beat_worker"], asdict(worker))

    def forget_worker(self, name: str) -> None:
        with self._connect() as connection:
            connection.execute(self._sql["forget_worker"], {"name": name})

    def forget_silent_workers(self, before: datetime) -> int:
        with self._connect() as connection:
            gone = connection.execute(self._sql["forget_silent_workers"], {"before": before})
            return max(gone.rowcount, 0)

    def workers(self, limit: int = 100) -> list[WorkerBeat]:
        with self._connect() as connection:
            rows = connection.execute(self._sql["select_workers"], {"limit": limit}).fetchall()
        return [records.worker(row) for row in rows]

    def record_sweep(self, sweep: Sweep) -> None:
        with self._connect() as connection:
            connection.execute(self._sql["insert_sweep"], housekeeping.sweep_params(sweep))

    def running(self, limit: int = 1000) -> list[Occurrence]:
        with self._connect() as connection:
            rows = connection.execute(self._sql["select_running"], {"limit": limit}).fetchall()
        return [records.occurrence(row) for row in rows]

    def job_counts(self) -> dict[str, int]:
        with self._connect() as connection:
            rows = connection.execute(self._sql["job_counts"]).fetchall()
        return {row["job"]: row["schedules"] for row in rows}

    def retry_failed(
        self, tenant: str | None, key: str, scheduled_for: datetime, now: datetime
    ) -> bool:
        params = {"tenant": tenant_column(tenant), "key": key, "scheduled_for": scheduled_for}
        with self._connect() as connection:
            found = connection.execute(self._sql["retry_failed"], {**params, "now": now}).fetchone()
            if found is not None:
                connection.execute(self._sql["notify_change"])
        return found is not None

    def record_action(self, action: Action) -> None:
        with self._connect() as connection:
            connection.execute(self._sql["insert_action"], housekeeping.action_params(action))

    def actions(self, tenant: str | None, key: str | None, limit: int = 50) -> list[Action]:
        params = {"tenant": tenant_column(tenant), "key": key, "limit": limit}
        with self._connect() as connection:
            rows = connection.execute(self._sql["select_actions"], params).fetchall()
        return [housekeeping.action(row) for row in rows]

    def code_versions(self, limit: int = 20) -> list[CodeVersion]:
        with self._connect() as connection:
            rows = connection.execute(self._sql["list_code_versions"], {"limit": limit}).fetchall()
        return [CodeVersion(**row) for row in rows]

    def leases(self, limit: int = 1000) -> list[Lease]:
        with self._connect() as connection:
            params = {"limit": limit, "released": housekeeping.RELEASED}
            rows = connection.execute(self._sql["list_leases"], params).fetchall()
        return [housekeeping.lease(row) for row in rows]

    def sweeps(self, limit: int = 20) -> list[Sweep]:
        with self._connect() as connection:
            rows = connection.execute(self._sql["select_sweeps"], {"limit": limit}).fetchall()
        return [housekeeping.sweep(row) for row in rows]

    def history_horizon(self) -> datetime | None:
        with self._connect() as connection:
            row = connection.execute(self._sql["history_horizon"]).fetchone()
        return None if row is None else row["before"].astimezone(UTC)

    def prune(self, before: datetime, limit: int) -> int:
        with self._connect() as connection:
            pruned = connection.execute(
                self._sql["prune_occurrences"], {"before": before, "limit": limit}
            ).rowcount
            connection.execute(self._sql["raise_history_horizon"], {"before": before})
            connection.execute(
                self._sql["prune_keyless_schedules"], {"before": before, "limit": limit}
            )
            connection.execute(self._sql["prune_sweeps"], {"before": before})
            connection.execute(self._sql["prune_actions"], {"before": before})
        return max(pruned, 0)

    def reclaim_expired(self, now: datetime, retries: Mapping[str, int]) -> list[Reclaimed]:
        if not retries:
            return []
        done: list[Reclaimed] = []
        params = {"now": now, "jobs": sorted(retries)}
        with self._connect() as connection:
            for row in connection.execute(self._sql["reclaimable"], params).fetchall():
                decided = housekeeping.reclaim(row, retries[row["job"]], now)
                changed = connection.execute(self._sql["reclaim"], decided.params).fetchone()
                if changed is None:
                    continue
                if decided.report.status == "failed":
                    count = {"schedule_id": changed["schedule_id"], "pause_after": None, "now": now}
                    connection.execute(self._sql["count_failure"], count)
                done.append(decided.report)
            if any(r.status == "retrying" for r in done):
                connection.execute(self._sql["notify_change"])
        return done

    def fail_orphaned(
        self, now: datetime, jobs: Collection[str], lost_before: datetime
    ) -> list[Abandoned]:
        params = {"jobs": sorted(jobs), "lost_before": lost_before}
        with self._connect() as connection:
            found = connection.execute(self._sql["orphaned"], params).fetchall()
            if found:
                connection.cursor().executemany(
                    self._sql["fail_orphan"],
                    [housekeeping.orphan_params(row, now) for row in found],
                )
        return [records.abandoned(row) for row in found]

    def release(self, claims: Sequence[Claim], now: datetime) -> int:
        if not claims:
            return 0
        params = {
            "ids": _bigint_array(c.occurrence_id for c in claims),
            "fences": _bigint_array(c.fence for c in claims),
        }
        with self._connect() as connection:
            # Not prepared, for the plan's sake: see _book_success.
            released = len(
                connection.execute(self._sql["release_claims"], params, prepare=False).fetchall()
            )
            if released:
                connection.execute(self._sql["notify_change"])
        return released

    def mark_left_running(self, claims: Sequence[Claim], reason: str) -> int:
        if not claims:
            return 0
        params = {
            "ids": _bigint_array(c.occurrence_id for c in claims),
            "fences": _bigint_array(c.fence for c in claims),
            "reason": reason,
        }
        with self._connect() as connection:
            # Not prepared, for the plan's sake: see _book_success.
            rows = connection.execute(self._sql["mark_left_running"], params, prepare=False)
            return len(rows.fetchall())

    def watch(self, on_change: Callable[[], None], *, outcomes: bool = False) -> Watch | None:
        try:
            conninfo = make_conninfo(self.conninfo, connect_timeout=_TIMEOUT_S, **_KEEPALIVES)
            connection = psycopg.connect(conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot watch PostgreSQL for changes: {exc}") from exc
        try:
            connection.execute(self._sql["listen_changes"])
            if outcomes:
                connection.execute(self._sql["listen_outcomes"])
        except psycopg.Error as exc:
            connection.close()
            raise StoreUnavailable(f"cannot watch PostgreSQL for changes: {exc}") from exc
        return Listener(connection, on_change)

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pool_pid == os.getpid():
            pool.close()


class _IdleCheck:
    """The pool's check before it hands a connection out: one poll of its socket, no round trip.

    An idle connection has nothing to read unless the server closed it (a restart, a cut). Such a
    connection is closed, and the pool drained, since every idle connection went to that same
    server; raising makes the pool take another, or open a new one. It holds its pool weakly: a
    store dropped without `close` must not stay alive, connected, through a reference cycle.
    """

    def __init__(self) -> None:
        self.pool: weakref.ref[ConnectionPool[Connection]] | None = None

    def __call__(self, connection: Connection) -> None:
        if connection.closed or _readable(connection.fileno()):
            connection.close()
            pool = self.pool() if self.pool is not None else None
            if pool is not None:
                pool.drain()
            raise StoreUnavailable("PostgreSQL closed an idle connection")


def _decode_safely_on(cursor: psycopg.Cursor[dict[str, Any]]) -> None:
    set_json_loads(payloads.decode, cursor)


# The server identity of each caller's connection seen, asked once per connection.
_identities: weakref.WeakKeyDictionary[Connection, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def _identity(connection: Connection) -> tuple[Any, ...]:
    """Which database ``connection`` is on: name, server (by its start time), port, schema."""
    row = connection.cursor(row_factory=dict_row).execute(queries("postgres")["identity"])
    found = row.fetchone()
    assert found is not None
    return (found["db"], found["started"], found["port"], found["schema"])


def _readable(fd: int) -> bool:
    """True when socket ``fd`` has something to read (or its peer hung up), without waiting."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def _bigint_array(values: Iterable[int]) -> str:
    """``values`` as a PostgreSQL array literal, for the ``::bigint[]`` ids and fences of a
    batch: psycopg dumps a list element by element in Python, which was a tenth of a burst's
    loop in a profile."""
    return "{" + ",".join(str(int(value)) for value in values) + "}"


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
