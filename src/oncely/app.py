"""`oncely.App`: the public face of the scheduler (DESIGN.md, "Public API")."""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar, overload

from oncely import scheduling
from oncely.arguments import (
    checked_count,
    checked_job_name,
    checked_key,
    checked_status,
    checked_tenant,
    shown,
)
from oncely.awaitables import twin
from oncely.clock import DatabaseClock
from oncely.engine import (
    DEFAULT_GRACE,
    DEFAULT_LEASE,
    DEFAULT_MISFIRE_LIMIT,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    Delivery,
    Engine,
    Explanation,
    Job,
    Misfire,
    Run,
    TickReport,
    worker_id,
)
from oncely.errors import (
    ConfigurationError,
    InvalidSchedule,
    TenantMismatch,
    UnknownSchedule,
)
from oncely.locks import RESERVED_LOCK_PREFIX, Lock, LockProvider, StoreProvider
from oncely.model import (
    Attempt,
    Occurrence,
    OccurrenceStatus,
    Overlap,
    Planned,
    Schedule,
    ScheduleStatus,
)
from oncely.recurrence import Instance, RRule, Trigger, as_utc
from oncely.store import DEFAULT_URL, Store, StoreUrl, open_store

if TYPE_CHECKING:
    from oncely.worker import Embedded, Parts

Handler = Callable[[Run], Any]
H = TypeVar("H", bound=Handler)

_BACKFILL_LIMIT = 100_000
# One page of `oncely jobs`: a service with a million per-user reminders listed them all.
DEFAULT_PAGE = 1000


class App:
    """A scheduler bound to one database; declare jobs on it, then tick or run a worker.

    ``url`` defaults to ``$ONCELY_DATABASE_URL``, else the embedded ``sqlite:///oncely.db``.
    ``clock`` (a callable returning an aware datetime) decides every time comparison, leases
    included, so tests move time without sleeping. Without one, times are the database's
    (`oncely.clock.DatabaseClock`), so workers on machines whose clocks disagree still agree.
    Nothing connects until first use; the database is migrated then.
    """

    def __init__(self, url: str | None = None, clock: Callable[[], datetime] | None = None):
        chosen = url if url is not None else os.environ.get("ONCELY_DATABASE_URL") or DEFAULT_URL
        StoreUrl.parse(chosen)  # a bad URL fails here, where it is written, not at first tick
        if clock is not None and not callable(clock):
            raise ConfigurationError(
                f"clock={clock!r} is not callable; pass a function returning an aware datetime"
            )
        self.url = chosen
        self._clock = clock or DatabaseClock()
        self._jobs: dict[str, Job] = {}
        self._store: Store | None = None
        self._migrated = False
        self._engine: Engine | None = None
        # The engines of this app's workers, each their own (an engine is not thread-safe).
        self._worker_engines: weakref.WeakSet[Engine] = weakref.WeakSet()
        self._lock = threading.RLock()
        self._embedded: Embedded | None = None
        _APPS.add(self)

    # --- jobs ---------------------------------------------------------------------------------

    @overload
    def job(self, trigger: H, /) -> Job: ...

    @overload
    def job(
        self,
        trigger: Trigger | None = None,
        /,
        *,
        name: str | None = None,
        retries: int = DEFAULT_RETRIES,
        delivery: Delivery = "at_least_once",
        misfire: Misfire = "skip",
        grace: timedelta = DEFAULT_GRACE,
        overlap: Overlap = "skip",
        pause_after: int | None = None,
        misfire_limit: int = DEFAULT_MISFIRE_LIMIT,
        lease: timedelta = DEFAULT_LEASE,
        timeout: timedelta | None = DEFAULT_TIMEOUT,
    ) -> Callable[[Handler], Job]: ...

    def job(
        self,
        trigger: Trigger | Handler | None = None,
        /,
        *,
        name: str | None = None,
        retries: int = DEFAULT_RETRIES,
        delivery: Delivery = "at_least_once",
        misfire: Misfire = "skip",
        grace: timedelta = DEFAULT_GRACE,
        overlap: Overlap = "skip",
        pause_after: int | None = None,
        misfire_limit: int = DEFAULT_MISFIRE_LIMIT,
        lease: timedelta = DEFAULT_LEASE,
        timeout: timedelta | None = DEFAULT_TIMEOUT,
    ) -> Job | Callable[[Handler], Job]:
        """Declare a job: ``@app.job(trigger, ...)``, or ``@app.job()`` for one scheduled at run
        time. The schedule of a job with a trigger is keyed by the job's name. An attempt still
        running after ``timeout`` (default 1 hour; None: none) fails loudly and frees its slot.

        Raises `ConfigurationError` for an option oncely cannot use or a name declared twice.
        """
        if callable(trigger) and not isinstance(trigger, Trigger):
            return self.job()(trigger)  # bare @app.job
        declared_trigger = trigger

        def declare(func: Handler) -> Job:
            if isinstance(func, Job):  # stacked decorators, or a job declared on another app
                func = func.func
            job_name = checked_job_name(name if name is not None else getattr(func, "__name__", ""))
            if declared_trigger is not None and isinstance(declared_trigger, RRule):
                _require_start(declared_trigger, job_name)
            job = Job(
                job_name,
                func,
                declared_trigger,
                retries=retries,
                delivery=delivery,
                misfire=misfire,
                grace=grace,
                overlap=overlap,
                pause_after=pause_after,
                misfire_limit=misfire_limit,
                lease=lease,
                timeout=timeout,
            )
            with self._lock:
                if job_name in self._jobs:
                    raise ConfigurationError(
                        f"a job named {job_name!r} is already declared on this app; job names "
                        "key their schedules, so give one of them name="
                    )
                self._jobs[job_name] = job
                for engine in [self._engine, *self._worker_engines]:
                    if engine is not None:
                        engine.reconciled = False
            return job

        return declare

    @property
    def jobs(self) -> dict[str, Job]:
        """The jobs declared on this app, by name."""
        return dict(self._jobs)

    # --- scheduling (the no-tenant space, or ``tenant=``) -------------------------------------

    def schedule(
        self,
        job: Job | str,
        trigger: Trigger,
        *,
        key: str,
        payload: Any = None,
        tenant: str | None = None,
        end: datetime | None = None,
        connection: Any = None,
    ) -> Schedule:
        """Create schedule ``key`` running ``job`` on ``trigger``, or replace what it runs (upsert).

        Saving the same trigger again keeps the next run; a changed one replaces the future and
        never replays the past. An RRULE without a start starts now; ``end`` applies to RRULEs
        with neither UNTIL nor COUNT. Raises `UnknownJob`, `InvalidSchedule` (including a
        trigger that never fires again), `NaiveDatetime`, `InvalidPayload`.

        ``connection``: the caller's open transaction to write in, uncommitted (see
        `scheduling`); here and in `defer`, the bulk calls, `unschedule`, `pause`, `resume` and
        `trigger`. Raises `ConfigurationError` for one on another database or in no transaction.
        """
        return scheduling.schedule(self, tenant, job, trigger, key, payload, end, connection)

    def defer(
        self,
        job: Job | str,
        *,
        at: datetime,
        key: str | None = None,
        payload: Any = None,
        tenant: str | None = None,
        connection: Any = None,
    ) -> Schedule:
        """Run ``job`` once at ``at`` (or as soon as possible if that has passed): a durable timer.

        ``key`` makes it idempotent: deferring the same key and time again changes nothing; a new
        time replaces the timer if it has not run. Raises `UnknownJob`, `NaiveDatetime`,
        `InvalidPayload`.
        """
        return scheduling.defer(self, tenant, job, at, key, payload, connection)

    def defer_many(
        self, job: Job | str, items: Iterable[Mapping[str, Any]], *, connection: Any = None
    ) -> list[Schedule]:
        """`defer` each of ``items`` (dicts of ``at``, and ``key``, ``payload``, ``tenant`` as
        `defer` takes them), all in one transaction: all or nothing, one wake-up of the workers.

        Each item is checked and kept idempotent by its key as `defer` does; an error about
        one names the item (index and key) and nothing is written. Returns the schedules in
        order. Raises what `defer` raises, and `InvalidSchedule` for two items of one key.
        """
        return scheduling.defer_many(self, None, job, items, connection)

    def schedule_many(
        self, job: Job | str, items: Iterable[Mapping[str, Any]], *, connection: Any = None
    ) -> list[Schedule]:
        """`schedule` each of ``items`` (dicts of ``trigger`` and ``key``, and ``payload``,
        ``tenant``, ``end`` as `schedule` takes them), all in one transaction, as `defer_many`.
        """
        return scheduling.schedule_many(self, None, job, items, connection)

    def unschedule(self, key: str, *, connection: Any = None) -> Schedule:
        """Stop schedule ``key`` for good; its history stays. Raises `UnknownSchedule`, and
        `InvalidSchedule` for the schedule of a code-declared job: the code decides that one
        (every start saves it again), so remove the job's trigger from the code, or `pause` it,
        which lasts across restarts."""
        return _unschedule(self, None, key, connection)

    def pause(self, key: str, *, until: datetime | None = None, connection: Any = None) -> Schedule:
        """Stop schedule ``key`` firing until `resume`, across restarts (and the saves of a
        code-declared job's schedule at each start). Raises `UnknownSchedule`.

        ``until`` (aware, in the future): the pause ends by itself then, as if resumed at that
        moment (the worker wakes for it; the resume is recorded in the schedule's actions).
        Raises `InvalidSchedule` for a naive or past ``until``. Pausing again replaces it.
        """
        return _set_paused(self, None, key, True, connection, until)

    def resume(self, key: str, *, connection: Any = None) -> Schedule:
        """Let paused schedule ``key`` fire again. Raises `UnknownSchedule`."""
        return _set_paused(self, None, key, False, connection)

    def trigger(self, key: str, *, connection: Any = None) -> int:
        """Run schedule ``key`` once now, besides its own times. Raises `UnknownSchedule`."""
        return _trigger(self, None, key, connection)

    def backfill(self, key: str, since: datetime, until: datetime) -> int:
        """Create schedule ``key``'s occurrences in [since, until], each once, however often
        called; ones skipped before run after all. Returns how many were added or re-armed."""
        return _backfill(self, None, key, since, until)

    def explain(self, key: str, *, upcoming: int = 5, recent: int = 10) -> Explanation:
        """Why schedule ``key`` did or did not fire; ``str()`` of the result reads as a report.

        Raises `UnknownSchedule`.
        """
        return _explain(self, None, key, upcoming, recent)

    def schedules(
        self,
        tenant: str | None = None,
        *,
        job: Job | str | None = None,
        status: ScheduleStatus | None = None,
        key_prefix: str | None = None,
        after: Schedule | tuple[str | None, str] | None = None,
        limit: int | None = None,
    ) -> list[Schedule]:
        """Every tenant's schedules (this app is not bound to one), or only ``tenant``'s, by
        (tenant, key): all of them, or one page of ``limit`` at most, after the schedule ``after``
        (the last of the previous page, or its (tenant, key)), filtered by ``job``, ``status``
        and ``key_prefix``; unscheduled ones only with ``status="removed"``. Raises
        `ConfigurationError` for a filter it cannot use."""
        return _schedules(self, tenant, tenant is None, job, status, key_prefix, after, limit)

    def history(
        self,
        key: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        status: OccurrenceStatus | None = None,
        limit: int = 100,
    ) -> list[Occurrence]:
        """Occurrences of every tenant, newest first: what ran, what did not, and why."""
        return _history(self, None, key, since, until, status, limit, all_tenants=True)

    def attempts(
        self, key: str, scheduled_for: datetime, *, tenant: str | None = None
    ) -> list[Attempt]:
        """Every attempt of schedule ``key``'s (of ``tenant``'s) occurrence at ``scheduled_for``,
        first first: when each started and ended, its worker and fence, how it ended, its error.

        The last is the occurrence's own (`Occurrence.attempts` counts them all); ones before it
        booked by a version of oncely older than the attempts table, or past the most kept
        (100), are not listed. Raises `UnknownSchedule` when there is no such occurrence.
        """
        return _attempts(self, tenant, key, scheduled_for)

    # The awaitable twins (oncely.awaitables): each awaits the call above on a thread pool.
    schedule_async = twin(schedule)
    defer_async = twin(defer)
    defer_many_async = twin(defer_many)
    schedule_many_async = twin(schedule_many)
    unschedule_async = twin(unschedule)
    pause_async = twin(pause)
    resume_async = twin(resume)
    trigger_async = twin(trigger)
    backfill_async = twin(backfill)
    explain_async = twin(explain)
    schedules_async = twin(schedules)
    history_async = twin(history)
    attempts_async = twin(attempts)

    def for_tenant(self, tenant: str) -> TenantView:
        """A view of this app that sees and changes only ``tenant``'s schedules and history.

        Raises `InvalidSchedule` for a tenant id that is not a non-empty str a store can keep.
        """
        return TenantView(self, checked_tenant(tenant))

    # --- running ------------------------------------------------------------------------------

    def tick(self) -> TickReport:
        """Run everything due now, in this process. Raises `TickFailed` naming a failed step.

        The handlers run one after another, claimed in small batches: an occurrence claimed
        beside a slow handler waits for it, and if that outlasts its lease, another worker
        takes it over (an at_most_once one is never held waiting: it is claimed when its turn
        comes). A service with slow jobs runs `run_worker` (handlers in parallel).
        """
        return self._the_engine().tick()

    def lock(
        self,
        name: str,
        *,
        at_most: timedelta,
        at_least: timedelta = timedelta(0),
        provider: LockProvider | None = None,
        blocking: bool = False,
        timeout: float | None = None,
    ) -> Lock:
        """A distributed lock named ``name`` (see `oncely.locks.Lock`).

        As a decorator (sync or async) the call is skipped, returning None, while another holds
        it; as a context manager it raises `LockHeld` (or, ``blocking=True``, waits up to
        ``timeout`` seconds first). ``provider`` None is this app's database (timed by the
        database server's clock on PostgreSQL); ``oncely.locks.redis(url)`` is Redis/Valkey.
        """
        if isinstance(name, str) and name.startswith(RESERVED_LOCK_PREFIX):
            raise ConfigurationError(
                f"lock name {shown(name)}: names starting {RESERVED_LOCK_PREFIX!r} are reserved "
                "for oncely's own locks (a user lock named oncely:reconcile stopped every tick); "
                "choose another name"
            )
        if provider is not None and not isinstance(provider, LockProvider):
            raise ConfigurationError(
                f"provider={shown(provider)} is not a lock provider; pass None (this app's "
                "database) or oncely.locks.redis(url)"
            )
        chosen = provider if provider is not None else StoreProvider(lambda: self.store, self.now)
        return Lock(
            name,
            at_most=at_most,
            at_least=at_least,
            provider=chosen,
            owner=worker_id,
            blocking=blocking,
            timeout=timeout,
        )

    def run_worker(
        self,
        *,
        concurrency: int = 8,
        drain_timeout: float = 30.0,
        http: str | None = None,
        retention: timedelta | str = timedelta(days=30),
    ) -> None:
        """Run this app's jobs until SIGTERM/SIGINT (or the worker is stopped), then drain.

        What `oncely run` calls; safe to run in any number of processes on any number of
        machines. ``concurrency`` bounds the handlers running at once in this process;
        ``http`` (``"HOST:PORT"``) serves ``/healthz`` and ``/metrics``, and
        ``"HOST:FIRST-LAST"`` serves them on the first free port of that range, so that every
        process of a server gets one; history older than ``retention`` (a timedelta, or a
        duration as ``oncely run --retention`` reads it: ``"30d"``) is pruned by housekeeping.
        See `oncely.worker.Worker`.
        """
        from oncely.worker import Worker

        Worker(
            self,
            concurrency=concurrency,
            drain_timeout=drain_timeout,
            http=http,
            retention=retention,
        ).run()

    def start(
        self,
        *,
        concurrency: int = 8,
        http: str | None = None,
        retention: timedelta | str = timedelta(days=30),
    ) -> None:
        """Run `run_worker`'s loop on a background thread of this process; return at once.

        For embedding in every process of a web server (see docs/embedding.md): any number of
        processes may each run one, and every occurrence still runs once. One loop per app and
        process: calling it again, from any thread, while the loop runs changes nothing. The
        thread installs no signal handlers and serves no HTTP unless ``http`` is given; the
        database is opened by the loop, so a database that is down delays jobs, not this call.
        An error that ends the loop is logged (logger ``oncely``); `start` then starts a new one.
        `stop`, `close`, or interpreter exit stops it. A process forked from this one inherits no
        running loop and may start its own (gunicorn's ``post_fork``). The options are
        `run_worker`'s; give N processes an ``http`` port range of N ports or more. Raises
        `ConfigurationError` for options the worker cannot use.
        """
        from oncely.worker import Embedded

        with self._lock:
            if self._embedded is None:
                self._embedded = Embedded(self)
            embedded = self._embedded
        embedded.start(concurrency=concurrency, http=http, retention=retention)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop `start` began, as SIGTERM stops `run_worker`; return within ``timeout``.

        No new claims; running handlers get until shortly before ``timeout`` seconds to finish,
        and one still running then is left running: its lease is left to expire (and its
        occurrence runs again, or is abandoned if at_most_once) and its history's reason says
        so. Called from inside one of this app's handlers it asks the loop to stop and returns
        at once, since waiting would wait for the caller itself. Without a started loop it does
        nothing; `start` afterwards starts a new one.
        """
        if not isinstance(timeout, int | float) or timeout < 0:
            raise ConfigurationError(f"timeout={timeout!r}: give 0 seconds or more")
        with self._lock:
            embedded = self._embedded
        if embedded is not None:
            embedded.stop(timeout)

    def migrate(self) -> list[int]:
        """Apply the migrations the database has not seen; return their versions.

        The store also migrates itself on first use; this is `oncely migrate`, for deploys that
        migrate as a step of their own.
        """
        return self._opened_store(migrate=False).migrate(self.now())

    def now(self) -> datetime:
        """The app clock's time, aware UTC."""
        now = self._clock()
        if not isinstance(now, datetime) or now.utcoffset() is None:
            raise ConfigurationError(
                f"the clock returned {now!r}; it must return an aware datetime"
            )
        return now.astimezone(UTC)

    @property
    def store(self) -> Store:
        """The store, opened and migrated on first use."""
        return self._opened_store(migrate=True)

    def _opened_store(self, *, migrate: bool) -> Store:
        with self._lock:
            if self._store is None:
                self._store = open_store(self.url)
                self._migrated = False
            if isinstance(self._clock, DatabaseClock):
                self._clock.sync(self._store, every_s=math.inf)  # the first use only
            if migrate and not self._migrated:
                self._store.migrate(self.now())
                self._migrated = True
            return self._store

    def _sync_clock(self) -> None:
        """Sample the default clock's database time again, once a minute at most."""
        if isinstance(self._clock, DatabaseClock):
            self._clock.sync(self.store)

    def worker_parts(self) -> Parts:
        """What a worker of this app is built from (`oncely.worker.Worker` asks for it): this
        app assembles them, and the worker reaches for nothing else of it."""
        from oncely.worker import Parts

        return Parts(
            engine=self._worker_engine,
            clock=self.now,
            sync_clock=self._sync_clock,
            locks=StoreProvider(lambda: self.store, self.now),
            jobs=lambda: self.jobs,
        )

    def _worker_engine(self) -> Engine:
        engine = Engine(self.store, self._jobs, self.now)
        with self._lock:
            self._worker_engines.add(engine)
        return engine

    def close(self) -> None:
        """Stop a loop `start` began (as `stop` does), then release the store's connections and
        the async-handler loop."""
        self.stop()
        with self._lock:
            engine, store = self._engine, self._store
            self._engine = self._store = None
        if engine is not None:
            engine.close()
        if store is not None:
            store.close()

    def _after_fork(self) -> None:
        """In a forked child: nothing of the parent's that threads or sockets back is kept."""
        # A parent thread may have held the lock at the fork; it will never release it here.
        self._lock = threading.RLock()
        # The engine's async-handler loop ran on a thread that the child does not have, and the
        # store's connections are the parent's: both open anew on first use.
        self._engine = None
        self._store = None
        self._migrated = False
        if self._embedded is not None:
            self._embedded.after_fork()

    def _the_engine(self) -> Engine:
        with self._lock:
            if self._engine is None:
                self._engine = Engine(self.store, self._jobs, self.now)
            return self._engine

    def _job(self, job: Job | str) -> Job:
        return scheduling.declared_job(self._jobs, job)

    def __repr__(self) -> str:
        return f"<oncely.App {StoreUrl.parse(self.url).dialect} jobs={sorted(self._jobs)}>"


_APPS: weakref.WeakSet[App] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for app in list(_APPS):
        app._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


class TenantView:
    """`App` bound to one tenant: every read and write is confined to that tenant's rows."""

    def __init__(self, app: App, tenant: str) -> None:
        self.app = app
        self.tenant = tenant

    def _check(self, tenant: str | None) -> None:
        if tenant is not None and checked_tenant(tenant) != self.tenant:
            raise TenantMismatch(
                f"this view is bound to tenant {self.tenant!r} and was asked to write to "
                f"tenant {tenant!r}; use app.for_tenant({tenant!r}) for that tenant"
            )

    def schedule(
        self,
        job: Job | str,
        trigger: Trigger,
        *,
        key: str,
        payload: Any = None,
        tenant: str | None = None,
        end: datetime | None = None,
        connection: Any = None,
    ) -> Schedule:
        self._check(tenant)
        return scheduling.schedule(
            self.app, self.tenant, job, trigger, key, payload, end, connection
        )

    def defer(
        self,
        job: Job | str,
        *,
        at: datetime,
        key: str | None = None,
        payload: Any = None,
        tenant: str | None = None,
        connection: Any = None,
    ) -> Schedule:
        self._check(tenant)
        return scheduling.defer(self.app, self.tenant, job, at, key, payload, connection)

    def defer_many(
        self, job: Job | str, items: Iterable[Mapping[str, Any]], *, connection: Any = None
    ) -> list[Schedule]:
        return scheduling.defer_many(self.app, self.tenant, job, items, connection)

    def schedule_many(
        self, job: Job | str, items: Iterable[Mapping[str, Any]], *, connection: Any = None
    ) -> list[Schedule]:
        return scheduling.schedule_many(self.app, self.tenant, job, items, connection)

    def unschedule(self, key: str, *, connection: Any = None) -> Schedule:
        return _unschedule(self.app, self.tenant, key, connection)

    def pause(self, key: str, *, until: datetime | None = None, connection: Any = None) -> Schedule:
        return _set_paused(self.app, self.tenant, key, True, connection, until)

    def resume(self, key: str, *, connection: Any = None) -> Schedule:
        return _set_paused(self.app, self.tenant, key, False, connection)

    def trigger(self, key: str, *, connection: Any = None) -> int:
        return _trigger(self.app, self.tenant, key, connection)

    def backfill(self, key: str, since: datetime, until: datetime) -> int:
        return _backfill(self.app, self.tenant, key, since, until)

    def explain(self, key: str, *, upcoming: int = 5, recent: int = 10) -> Explanation:
        return _explain(self.app, self.tenant, key, upcoming, recent)

    def schedules(
        self,
        *,
        job: Job | str | None = None,
        status: ScheduleStatus | None = None,
        key_prefix: str | None = None,
        after: Schedule | tuple[str | None, str] | None = None,
        limit: int | None = None,
    ) -> list[Schedule]:
        return _schedules(self.app, self.tenant, False, job, status, key_prefix, after, limit)

    def history(
        self,
        key: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        status: OccurrenceStatus | None = None,
        limit: int = 100,
    ) -> list[Occurrence]:
        return _history(self.app, self.tenant, key, since, until, status, limit)

    def attempts(self, key: str, scheduled_for: datetime) -> list[Attempt]:
        return _attempts(self.app, self.tenant, key, scheduled_for)

    # The awaitable twins (oncely.awaitables): each awaits the call above on a thread pool.
    schedule_async = twin(schedule)
    defer_async = twin(defer)
    defer_many_async = twin(defer_many)
    schedule_many_async = twin(schedule_many)
    unschedule_async = twin(unschedule)
    pause_async = twin(pause)
    resume_async = twin(resume)
    trigger_async = twin(trigger)
    backfill_async = twin(backfill)
    explain_async = twin(explain)
    schedules_async = twin(schedules)
    history_async = twin(history)
    attempts_async = twin(attempts)

    def __repr__(self) -> str:
        return f"<oncely.App view of tenant {self.tenant!r}>"


# --- operations shared by App and TenantView ----------------------------------------------------


def _schedules(
    app: App,
    tenant: str | None,
    all_tenants: bool,
    job: Job | str | None,
    status: ScheduleStatus | None,
    key_prefix: str | None,
    after: Schedule | tuple[str | None, str] | None,
    limit: int | None,
) -> list[Schedule]:
    if limit is not None:
        checked_count("limit", limit, least=1)
    if isinstance(after, Schedule):
        after = (after.tenant, after.key)
    elif after is not None and not (
        isinstance(after, tuple) and len(after) == 2 and isinstance(after[1], str)
    ):
        raise ConfigurationError(
            f"after={after!r} is not a Schedule or (tenant, key); pass the last schedule of the "
            "previous page"
        )
    if status is not None and status not in ("active", "ended", "invalid", "removed"):
        raise ConfigurationError(
            f"status={status!r}: use 'active', 'ended', 'invalid' or 'removed'"
        )
    if tenant is not None:
        checked_tenant(tenant)
    if key_prefix is not None:
        checked_key(key_prefix, "key_prefix")
    if after is not None:
        if after[0] is not None:
            checked_tenant(after[0])
        checked_key(after[1], "after")
    return app.store.list_schedules(
        tenant,
        all_tenants=all_tenants,
        job=None if job is None else app._job(job).name,
        status=status,
        prefix=key_prefix,
        after=after,
        limit=limit,
    )


def _unschedule(app: App, tenant: str | None, key: str, connection: Any) -> Schedule:
    within = scheduling.within_of(connection)
    schedule = app.store.get_schedule(tenant, checked_key(key), within=within)
    if schedule.origin == "code" and schedule.status != "removed":
        raise InvalidSchedule(
            f"schedule {key!r} is the schedule of job {schedule.job!r}, declared in code: each "
            "start saves it again",
            hint=f"remove the job's trigger from the code, or app.pause({key!r}), which lasts "
            "across restarts",
        )
    return app.store.remove_schedule(tenant, key, app.now(), within=within)


def _set_paused(
    app: App,
    tenant: str | None,
    key: str,
    paused: bool,
    connection: Any,
    until: datetime | None = None,
) -> Schedule:
    checked_key(key)
    within = scheduling.within_of(connection)
    now = app.now()
    if until is not None:
        until = as_utc(until, "until")
        if until <= now:
            raise InvalidSchedule(
                f"until={until.isoformat()} is not in the future (now is {now.isoformat()})",
                hint="pass a later time, or resume the schedule instead",
            )
    return app.store.set_paused(tenant, key, paused, now, until=until, within=within)


def _trigger(app: App, tenant: str | None, key: str, connection: Any) -> int:
    checked_key(key)
    within = scheduling.within_of(connection)
    now = app.now()
    planned = [Planned(scheduling.instance_at(now), origin="trigger")]
    return app.store.add_occurrences(tenant, key, planned, now=now, within=within)


def _backfill(app: App, tenant: str | None, key: str, since: datetime, until: datetime) -> int:
    checked_key(key)
    since, until = as_utc(since, "since"), as_utc(until, "until")
    now = app.now()
    if since > until:
        raise InvalidSchedule(f"backfill since {since} is after until {until}", hint="swap them")
    if until > now:
        raise InvalidSchedule(
            f"backfill until {until.isoformat()} is in the future",
            hint="backfill covers a past range; the schedule itself runs the future",
        )
    schedule = app.store.get_schedule(tenant, key)
    if schedule.trigger is None:
        raise InvalidSchedule(
            f"schedule {key!r} has no readable trigger ({schedule.status_reason})",
            hint="save it again with a valid trigger",
        )
    horizon = app.store.history_horizon()
    if horizon is not None and since < horizon:
        # Before the horizon, retention may have pruned what ran: a pruned success read as an
        # occurrence that never ran, and backfill ran it again.
        raise InvalidSchedule(
            f"backfill of {key!r} from {since.isoformat()} reaches before "
            f"{horizon.isoformat()}, where history has been pruned (retention), so oncely "
            "cannot tell which of those occurrences ran",
            hint=f"backfill from {horizon.isoformat()} on",
        )
    planned = []
    for instance in schedule.trigger.instances_within(since, until):
        planned.append(Planned(instance, origin="backfill"))
        if len(planned) > _BACKFILL_LIMIT:
            raise InvalidSchedule(
                f"backfill of {key!r} from {since} to {until} has more than {_BACKFILL_LIMIT} "
                "occurrences",
                hint="backfill a shorter range at a time",
            )
    return app.store.add_occurrences(tenant, key, planned, now=now, rearm_skipped=True)


def _explain(app: App, tenant: str | None, key: str, upcoming: int, recent: int) -> Explanation:
    checked_key(key)
    checked_count("upcoming", upcoming)
    checked_count("recent", recent)
    now = app.now()
    schedule = app.store.get_schedule(tenant, key)
    next_instances: list[Instance] = []
    if schedule.trigger is not None and schedule.next_run_at is not None and not schedule.paused:
        instances = schedule.trigger.instances_from(schedule.next_run_at)
        next_instances = list(islice(instances, upcoming))
    return Explanation(
        schedule=schedule,
        now=now,
        upcoming=next_instances,
        recent=app.store.history(tenant, key=key, limit=recent),
        running=app.store.history(tenant, key=key, status="running", limit=recent),
        worker_seen_at=max((v.last_seen_at for v in app.store.code_versions(1)), default=None),
    )


def _attempts(app: App, tenant: str | None, key: str, scheduled_for: datetime) -> list[Attempt]:
    if tenant is not None:
        checked_tenant(tenant)
    at = as_utc(scheduled_for, "scheduled_for")
    found = app.store.attempts(tenant, checked_key(key), at)
    if found is None:
        app.store.get_schedule(tenant, key)  # an unknown key says so
        raise UnknownSchedule(f"schedule {key!r} has no occurrence at {at.isoformat()}")
    return found


def _history(
    app: App,
    tenant: str | None,
    key: str | None,
    since: datetime | None,
    until: datetime | None,
    status: OccurrenceStatus | None,
    limit: int,
    *,
    all_tenants: bool = False,
) -> list[Occurrence]:
    return app.store.history(
        tenant,
        key=None if key is None else checked_key(key),
        since=None if since is None else as_utc(since, "since"),
        until=None if until is None else as_utc(until, "until"),
        status=checked_status(status),
        limit=checked_count("limit", limit, least=1),
        all_tenants=all_tenants,
    )


def _require_start(trigger: RRule, job: str) -> None:
    if trigger.start is None and trigger.rule.start is None:
        raise ConfigurationError(
            f"job {job!r}: a code-declared rrule needs a start (DTSTART or start=): without one, "
            "each process starting the app would give the rule a different start"
        )
