"""Bad input gets a specific OncelyError that says what to do, and nothing stored changes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from _engine_support import damage

import oncely
from oncely.testing import Clock


@pytest.fixture
def remind(app: oncely.App) -> oncely.Job:
    @app.job()
    def remind(run: oncely.Run) -> None:
        pass

    app.schedule(remind, oncely.every(hours=1), key="kept", payload={"v": 1})
    return remind


def unchanged(app: oncely.App) -> None:
    (kept,) = app.schedules()
    assert (kept.key, kept.payload, kept.trigger) == ("kept", {"v": 1}, oncely.every(hours=1))


def test_an_unknown_job(app: oncely.App, remind: oncely.Job) -> None:
    def stranger(run: oncely.Run) -> None:
        pass

    with pytest.raises(oncely.UnknownJob, match=r"@app.job\(\)"):
        app.schedule(stranger, oncely.every(hours=1), key="kept")  # type: ignore[arg-type]
    with pytest.raises(oncely.UnknownJob, match="known: remind"):
        app.defer("nope", at=app.now())
    unchanged(app)


def test_naive_datetimes(app: oncely.App, remind: oncely.Job) -> None:
    naive = datetime(2026, 12, 1, 9, 0)
    with pytest.raises(oncely.NaiveDatetime, match="no time zone"):
        app.defer(remind, at=naive, key="kept")
    with pytest.raises(oncely.NaiveDatetime):
        app.backfill("kept", naive, naive)
    with pytest.raises(oncely.NaiveDatetime):
        app.schedule(remind, oncely.rrule("FREQ=DAILY"), key="kept", end=naive)
    unchanged(app)


def test_a_trigger_that_never_fires(app: oncely.App, clock: Clock, remind: oncely.Job) -> None:
    past = (clock() - timedelta(days=1)).strftime("%Y%m%dT%H%M%SZ")
    with pytest.raises(oncely.InvalidSchedule, match="never fires"):
        app.schedule(remind, oncely.rrule(f"FREQ=DAILY;UNTIL={past}"), key="kept")
    with pytest.raises(oncely.InvalidSchedule, match="never fires"):
        app.schedule(remind, oncely.at(clock() - timedelta(hours=1)), key="kept")
    unchanged(app)


def test_an_invalid_rule(app: oncely.App, remind: oncely.Job) -> None:
    with pytest.raises(oncely.InvalidSchedule, match="FREQ"):
        app.schedule(remind, oncely.rrule("BYDAY=MO"), key="kept")
    with pytest.raises(oncely.InvalidSchedule, match="not a trigger"):
        app.schedule(remind, "0 9 * * *", key="kept")  # type: ignore[arg-type]
    unchanged(app)


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"x": "a\x00b"}, "NUL"),
        ({"k\x00": 1}, "NUL"),
        ([{"x": "\ud800"}], "surrogate"),
        (None, "nested deeper"),
    ],
)
def test_a_payload_no_store_can_keep(
    app: oncely.App, remind: oncely.Job, payload: object, says: str
) -> None:
    # PostgreSQL refused the strings with its own words and SQLite kept them; the deep one
    # escaped as RecursionError.
    if payload is None:
        payload = deep = []
        for _ in range(100_000):
            deep.append([])
            deep = deep[0]
    with pytest.raises(oncely.InvalidPayload, match=says):
        app.schedule(remind, oncely.every(hours=2), key="kept", payload=payload)
    with pytest.raises(oncely.InvalidPayload, match=says):
        app.defer(remind, at=app.now(), key="other", payload=payload)
    unchanged(app)


def test_a_payload_that_is_not_json(app: oncely.App, remind: oncely.Job) -> None:
    with pytest.raises(oncely.InvalidPayload, match="JSON"):
        app.schedule(remind, oncely.every(hours=2), key="kept", payload={"when": object()})
    with pytest.raises(oncely.InvalidPayload):
        app.defer(remind, at=app.now(), key="kept", payload=float("nan"))
    unchanged(app)


@pytest.mark.parametrize(
    ("key", "tenant", "says"),
    [
        ("a\x00b", None, "NUL"),
        ("\udcff", None, "surrogate"),
        ("k" * 1025, None, "1025 bytes"),
        ("\U0001f642" * 257, None, "1028 bytes"),
        ("kept", "acme\x00", "tenant='acme.* holds a NUL"),
        ("kept", "t" * 257, "257 bytes"),
    ],
)
def test_a_key_or_tenant_no_store_can_keep(
    app: oncely.App, remind: oncely.Job, key: str, tenant: str | None, says: str
) -> None:
    # PostgreSQL refused these with its own words (or as "unavailable", for a long key); SQLite
    # kept them. Both stores must take the same keys.
    with pytest.raises(oncely.InvalidSchedule, match=says) as raised:
        app.schedule(remind, oncely.every(hours=2), key=key, tenant=tenant)
    assert len(str(raised.value)) < 200
    with pytest.raises(oncely.InvalidSchedule, match=says):
        app.defer(remind, at=app.now(), key=key, tenant=tenant)
    unchanged(app)
    app.schedule(remind, oncely.every(hours=2), key="k" * 1024, tenant="t" * 256)


def test_a_tenant_mismatch(app: oncely.App, remind: oncely.Job) -> None:
    with pytest.raises(oncely.TenantMismatch):
        app.for_tenant("acme").schedule(remind, oncely.every(hours=2), key="x", tenant="b")
    unchanged(app)


def test_bad_job_options_name_the_option(app: oncely.App) -> None:
    def sync(run: oncely.Run) -> None:
        pass

    for options, named in [
        ({"retries": 0}, "retries=0"),
        ({"delivery": "exactly_once"}, "delivery='exactly_once'"),
        ({"misfire": "replay"}, "misfire='replay'"),
        ({"overlap": "queue"}, "overlap='queue'"),
        ({"grace": timedelta(minutes=-1)}, "grace="),
        ({"pause_after": 0}, "pause_after=0"),
    ]:
        with pytest.raises(oncely.ConfigurationError, match=named):
            app.job(**options)(sync)  # type: ignore[call-overload]
    assert app.jobs == {}


def test_a_job_name_declared_twice(app: oncely.App) -> None:
    @app.job()
    def sync(run: oncely.Run) -> None:
        pass

    with pytest.raises(oncely.ConfigurationError, match="already declared"):
        app.job()(sync)


def test_a_code_declared_rrule_needs_a_start(app: oncely.App) -> None:
    with pytest.raises(oncely.ConfigurationError, match="needs a start"):

        @app.job(oncely.rrule("FREQ=DAILY"))
        def daily(run: oncely.Run) -> None:
            pass


def test_a_clock_that_returns_naive_times(url: str) -> None:
    app = oncely.App(url, clock=lambda: datetime(2026, 1, 1))
    with pytest.raises(oncely.ConfigurationError, match="aware"):
        app.tick()
    app.close()


def test_a_bad_database_url() -> None:
    with pytest.raises(oncely.ConfigurationError):
        oncely.App("mysql://localhost/db")


def returns_in_time(call: Callable[[], object], seconds: float = 30) -> BaseException | None:
    """Run ``call`` on a thread; fail if it has not returned within ``seconds``; return what it
    raised (None if it returned)."""
    raised: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # reported to the test, which judges it
            raised.append(exc)
        else:
            raised.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{call} had not returned after {seconds} s"
    return raised[0]


def test_explain_with_upcoming_none_returns(app: oncely.App, remind: oncely.Job) -> None:
    # islice(instances, None) listed a perpetual schedule's every future occurrence: for ever.
    for upcoming, recent in [(None, 10), (5, None), (-1, 10), ("5", 10), (10**30, 10)]:
        raised = returns_in_time(lambda: app.explain("kept", upcoming=upcoming, recent=recent))  # type: ignore[arg-type]  # noqa: B023
        assert isinstance(raised, oncely.ConfigurationError), raised
        assert "upcoming=" in str(raised) or "recent=" in str(raised), raised
    assert app.explain("kept", upcoming=3).upcoming[2]


@pytest.mark.parametrize(
    ("key", "says"),
    [("\udcff", "surrogate"), (10**30, "not a schedule key"), (datetime(2026, 1, 1), "not a"),
     ("", "not a schedule key"), ("a\x00", "NUL"), (None, "not a schedule key")],
)  # fmt: skip
def test_every_call_that_takes_a_key_names_a_bad_one(
    app: oncely.App, remind: oncely.Job, key: object, says: str
) -> None:
    bad: Any = key
    since = app.now() - timedelta(hours=1)
    calls: dict[str, Callable[[], object]] = {
        "unschedule": lambda: app.unschedule(bad),
        "pause": lambda: app.pause(bad),
        "resume": lambda: app.resume(bad),
        "trigger": lambda: app.trigger(bad),
        "backfill": lambda: app.backfill(bad, since, app.now()),
        "explain": lambda: app.explain(bad),
        "view.pause": lambda: app.for_tenant("acme").pause(bad),
        "view.explain": lambda: app.for_tenant("acme").explain(bad),
    }
    if key is not None:
        calls["history"] = lambda: app.history(key=bad)
        calls["view.history"] = lambda: app.for_tenant("acme").history(key=bad)
    for name, call in calls.items():
        # UnicodeEncodeError on both stores; OverflowError and TypeError on SQLite.
        raised = returns_in_time(call)
        assert isinstance(raised, oncely.InvalidSchedule), (name, raised)
        assert "key=" in str(raised), (name, raised)
        assert says in str(raised), (name, raised)
    unchanged(app)


def test_rrule_and_lock_options_of_the_wrong_type_are_named(app: oncely.App) -> None:
    with pytest.raises(oncely.InvalidSchedule, match="max_span=3600"):
        oncely.rrule("FREQ=DAILY", max_span=3600)  # type: ignore[arg-type]
    with pytest.raises(oncely.ConfigurationError, match="timeout='5'"):
        app.lock("export", at_most=timedelta(minutes=1), timeout="5")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "says"),
    [("a\x00b", "NUL"), (7, "name=7"), ("\ud800", "surrogate"), ("n" * 1025, "1025 bytes"),
     ("", "no name")],
)  # fmt: skip
def test_a_job_name_no_store_can_keep_is_refused_where_it_is_declared(
    app: oncely.App, clock: Clock, name: object, says: str
) -> None:
    ran: list[str] = []

    @app.job(oncely.every(minutes=1))
    def healthy(run: oncely.Run) -> None:
        ran.append(run.key)

    def handler(run: oncely.Run) -> None:
        pass

    # On PostgreSQL a NUL or an int name made every tick fail at reconcile; a surrogate made
    # tick() raise UnicodeEncodeError past the worker loop, which catches only OncelyError.
    with pytest.raises(oncely.ConfigurationError, match=says):
        app.job(oncely.every(minutes=1), name=name)(handler)  # type: ignore[call-overload]
    with pytest.raises(oncely.ConfigurationError, match=says):
        app.job(name=name)(handler)  # type: ignore[call-overload]
    app.tick()
    clock.advance(minutes=1)
    app.tick()
    assert ran == ["healthy"]


def test_a_defer_at_the_first_or_last_instant_a_datetime_holds(
    app: oncely.App, clock: Clock, remind: oncely.Job
) -> None:
    # Found by tests/faults/test_public_api_fuzz.py: OverflowError, from a microsecond before.
    first, last = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
    app.defer(remind, at=first, key="first")
    app.defer(remind, at=last, key="last")
    app.tick()
    assert [(o.key, o.status) for o in app.history(key="first")] == [("first", "succeeded")]
    assert [(o.key, o.status) for o in app.history(key="last")] == [("last", "pending")]


def test_backfill_refuses_what_it_cannot_do_and_adds_nothing(
    app: oncely.App, clock: Clock, remind: oncely.Job
) -> None:
    @app.job(oncely.every(seconds=1))
    def beat(run: oncely.Run) -> None:
        pass

    app.tick()  # saves beat's code-declared schedule
    before = app.history(limit=1000)
    past = clock() - timedelta(days=1)
    with pytest.raises(oncely.InvalidSchedule, match=r"is after until .* \(swap them\)"):
        app.backfill("kept", past, past - timedelta(hours=1))
    with pytest.raises(oncely.InvalidSchedule, match="is in the future") as future:
        app.backfill("kept", past, clock() + timedelta(seconds=1))
    assert "the schedule itself runs the future" in str(future.value)
    with pytest.raises(oncely.UnknownSchedule, match="'nope'"):
        app.backfill("nope", past, past)
    # Two days of every second is 172,800 occurrences: refused whole, none of them written.
    with pytest.raises(oncely.InvalidSchedule, match="more than 100000 occurrences") as many:
        app.backfill("beat", clock() - timedelta(days=2), clock())
    assert "backfill a shorter range at a time" in str(many.value)
    damage(app, "kept", '{"kind": "teleport"}')
    with pytest.raises(oncely.InvalidSchedule, match="'kept' has no readable trigger") as unread:
        app.backfill("kept", past, past + timedelta(hours=3))
    assert "save it again with a valid trigger" in str(unread.value)
    assert app.history(limit=1000) == before


@pytest.mark.parametrize(
    "trigger",
    [oncely.every(hours=1), oncely.cron("0 9 * * *"), oncely.rrule("FREQ=DAILY;BYHOUR=9")],
    ids=["every", "cron", "rrule"],
)
def test_backfill_from_the_first_instant_a_datetime_holds(
    app: oncely.App, remind: oncely.Job, trigger: oncely.Trigger
) -> None:
    # Found by the public API fuzz: backfill computed the instant just before its start, and
    # at datetime.min that raised OverflowError out of the call.
    app.schedule(remind, trigger, key="edge")
    first = datetime.min.replace(tzinfo=UTC)
    at_first = app.backfill("edge", first, first)
    added = app.backfill("edge", first, first + timedelta(days=2))
    assert app.backfill("edge", first, first + timedelta(days=2)) == 0
    assert len(app.history(key="edge", limit=1000)) == at_first + added


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("lease", timedelta.max),
        ("lease", timedelta(days=8)),
        ("retries", 10**30),
        ("pause_after", 2**31),
        ("misfire_limit", 10**30),
    ],
)
def test_job_options_past_what_oncely_can_count_are_refused_where_declared(
    app: oncely.App, option: str, value: object
) -> None:
    """A lease of timedelta.max overflowed datetime on every claim: every tick failed, for every
    job, until the process restarted without it (found by the API fuzz under make faults)."""
    with pytest.raises(oncely.ConfigurationError, match=option):
        app.job(oncely.every(minutes=1), name="bounded", **{option: value})(lambda run: None)
    app.tick()
