"""Issue 21, the class: every public entry point called with hostile arguments, on both stores.

Each example calls one public method of `oncely.App`, of a tenant view, or one of the recurrence
constructors, with arguments drawn from wrong types, None, empty and huge strings, NUL and
surrogates, huge ints, naive and far-future datetimes, unknown zones, unserialisable and deeply
nested payloads (and, now and then, valid ones). Asserted after every call: only an
`oncely.OncelyError` escaped, the call returned within `BOUND_S` (on a thread, joined with a
timeout: nothing here times how fast anything is), and a tick still runs a healthy schedule of
its own tenant. ``run_worker`` and ``start`` are left out: they run until stopped, by design.

Short (``make test``): 300 examples of one to four calls a store; long (``make faults``): 2,000.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from _faults import LONG
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oncely
from oncely.testing import Clock

EXAMPLES = 2_000 if LONG else 300
BOUND_S = 30.0
START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _deep(levels: int) -> list[Any]:
    payload: list[Any] = []
    inner = payload
    for _ in range(levels):
        inner.append([])
        inner = inner[0]
    return payload


def _cycle() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


_SPECIAL_TEXT = [
    "", " ", "\x00", "a\x00b", "\ud800", "k\udcff", "🙂", "x" * 3000, "é" * 600,
    "oncely:reconcile", "oncely:housekeeping", "FREQ=DAILY", "FREQ=SECONDLY", "* * * * *",
    "61 * * * *", "FREQ=DAILY;COUNT=100000000000", "FREQ=DAILY;UNTIL=19700101T000000Z",
    "Mars/Olympus", "Europe/Berlin", "UTC", "Europe/Berlin\x00", "../../etc/passwd",
    "at_least_once", "transactional", "skip", "all", "latest", "buffer_one", "shift", "both",
    "pending", "failed", "a/b%2F", "DTSTART:99991231T235959Z\nRRULE:FREQ=DAILY",
]  # fmt: skip
# Characters that stores, encoders and parsers treat specially, often: st.text() alone draws no
# surrogates and seldom a NUL.
_hostile_chars = st.sampled_from(["\x00", "\ud800", "\udcff", "/", "%", "é", "🙂", " ", ":", ";"])
_text = st.one_of(
    st.sampled_from(_SPECIAL_TEXT),
    st.text(_hostile_chars | st.characters(), max_size=8),
)
_huge_ints = st.sampled_from([10**30, -(10**30), 2**63, -(2**63) - 1, 2**31, -1, 0, 1, 10**6])
_numbers = st.one_of(
    _huge_ints,
    st.integers(),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e300, 0.5, -0.0]),
    st.floats(),
)
_zones = st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))])
_datetimes = st.one_of(
    st.datetimes(),  # naive
    st.datetimes(timezones=_zones),
    st.sampled_from(
        [
            datetime.max,
            datetime.min,
            datetime.max.replace(tzinfo=UTC),
            datetime.min.replace(tzinfo=UTC),
            datetime.max.replace(tzinfo=timezone(timedelta(hours=-12))),
            datetime.min.replace(tzinfo=timezone(timedelta(hours=14))),
            START - timedelta(days=3),
            START + timedelta(minutes=5),
        ]
    ),
)
_timedeltas = st.one_of(
    st.timedeltas(),
    st.sampled_from([timedelta.max, timedelta.min, timedelta(0), timedelta(microseconds=1)]),
    st.timedeltas(min_value=timedelta(seconds=1), max_value=timedelta(days=400)),
)
_payloads = st.one_of(
    st.none(),
    st.builds(object),
    st.builds(_cycle),
    st.sampled_from([float("nan"), {1, 2}, b"bytes", {(1, 2): 3}, {"k": "\x00"}]),
    st.builds(_deep, st.sampled_from([99, 100, 101, 1300, 5000])),
    st.builds(lambda n: "x" * n, st.sampled_from([10, 4 * 1024 * 1024 - 1, 5 * 1024 * 1024])),
    st.recursive(
        st.none() | st.booleans() | _numbers | _text,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
        max_leaves=8,
    ),
)
_anything = st.one_of(
    st.none(),
    st.booleans(),
    _numbers,
    _text,
    st.binary(max_size=4),
    _datetimes,
    _timedeltas,
    st.builds(object),
    st.lists(st.integers(), max_size=2),
)


def _or_anything(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy`` three times in four, else anything at all: arguments of the right type
    reach further in, to the stores and the triggers."""
    # Not one_of(strategy, _anything): one_of flattens, and each of _anything's ten kinds would
    # weigh as much as ``strategy``.
    return st.sampled_from([1, 2, 3, 0]).flatmap(lambda n: strategy if n else _anything)


def _triggers() -> st.SearchStrategy[Any]:
    """Triggers made with generated arguments (when they construct), or anything else."""
    valid = st.sampled_from(
        [
            oncely.every(minutes=7),
            oncely.every(seconds=1),
            oncely.cron("*/5 * * * *", tz="Europe/Berlin"),
            oncely.rrule("FREQ=SECONDLY", start=START),
            oncely.rrule("FREQ=DAILY;COUNT=3", start=START, tz="America/New_York"),
            oncely.at(START + timedelta(minutes=3)),
            oncely.at(datetime(9999, 12, 29, tzinfo=UTC)),
        ]
    )
    made = st.one_of(
        st.builds(_made, st.just(oncely.cron), _or_anything(_text), _or_anything(_text)),
        st.builds(_made, st.just(lambda s: oncely.every(seconds=s)), _or_anything(_numbers)),
        st.builds(_made, st.just(oncely.at), _or_anything(_datetimes)),
        st.builds(
            _made,
            st.just(lambda text, start, span: oncely.rrule(text, start=start, max_span=span)),
            _or_anything(_text),
            st.none() | _datetimes,
            _or_anything(_timedeltas),
        ),
    )
    return _or_anything(st.booleans().flatmap(lambda mine: valid if mine else made))


def _made(factory: Callable[..., Any], *args: Any) -> Any:
    """``factory(*args)``, or the argument that made it refuse (refusals are tested apart)."""
    try:
        return factory(*args)
    except oncely.OncelyError:
        return args[0]


# Keys start with "k", job names with "j": a hostile key that happens to be valid never takes
# the name of a job a hostile declaration added, which the start refuses on purpose (issue 21.4).
_keys = _or_anything(st.builds(lambda t: f"k{t}", _text))
_job_names = _or_anything(st.builds(lambda t: f"j{t}", _text))
_tenants = _or_anything(st.builds(lambda t: f"t{t}", _text))


_counts = _or_anything(st.integers(-2, 2000) | _huge_ints)
_HISTORY = {
    "key": _keys,
    "since": _or_anything(_datetimes),
    "until": _or_anything(_datetimes),
    "status": _or_anything(st.sampled_from(["pending", "failed", "running", "done"])),
    "limit": _counts,
}
_LOCK = {
    "blocking": _or_anything(st.booleans()),
    "timeout": _or_anything(_numbers),
    "provider": _anything,
}
_JOB = {
    "retries": _or_anything(st.integers(-1, 10) | _huge_ints),
    "delivery": _or_anything(st.sampled_from(["at_least_once", "at_most_once", "transactional"])),
    "misfire": _or_anything(st.sampled_from(["skip", "latest", "all"])),
    "grace": _or_anything(_timedeltas),
    "overlap": _or_anything(st.sampled_from(["skip", "buffer_one", "allow"])),
    "pause_after": _or_anything(st.none() | st.integers(-1, 10) | _huge_ints),
    "misfire_limit": _or_anything(st.integers(-1, 10) | _huge_ints),
    "lease": _or_anything(_timedeltas),
}
_RRULE = {
    "start": _or_anything(_datetimes),
    "tz": _or_anything(_text),
    "end": _or_anything(_datetimes),
    "max_span": _or_anything(st.none() | _timedeltas),
    "dst_gap": _or_anything(st.sampled_from(["shift", "skip"])),
    "dst_fold": _or_anything(st.sampled_from(["first", "both"])),
}


def _bounded(call: Callable[[], object]) -> BaseException | None:
    """What ``call`` raised (None: it returned), run on a thread that must end within
    `BOUND_S`."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # judged by the test
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(BOUND_S)
    assert not thread.is_alive(), f"the call had not returned after {BOUND_S} s"
    return outcome[0]


class Target:
    """The app under test, its clock, and a healthy schedule in a tenant of its own."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.clock = Clock(START)
        self.app = oncely.App(url, clock=self.clock)
        self.runs = 0

        @self.app.job()
        def canary(run: oncely.Run) -> None:
            self.runs += 1

        @self.app.job()
        def remind(run: oncely.Run) -> None:
            pass

        self.remind = remind
        self.canary_tenant = f"canary-{uuid.uuid4().hex}"
        self.app.for_tenant(self.canary_tenant).schedule(
            canary, oncely.every(minutes=1), key="canary"
        )
        self.app.tick()

    def still_healthy(self) -> None:
        before = self.runs
        self.clock.advance(minutes=1)
        raised = _bounded(self.app.tick)
        assert raised is None, f"a tick after the call failed: {raised!r}"
        assert self.runs == before + 1, "the healthy schedule did not run at the next tick"


def _handler(run: oncely.Run) -> None:
    pass


def _operations(t: Target, data: st.DataObject) -> tuple[str, Callable[[], object]]:
    """One public call with drawn arguments: its name and a thunk that makes it."""
    draw = data.draw
    app = t.app
    jobs = _or_anything(st.sampled_from([t.remind, "remind"]))
    name = draw(
        st.sampled_from(
            [
                "schedule", "defer", "unschedule", "pause", "resume", "trigger", "backfill",
                "explain", "schedules", "history", "for_tenant", "lock", "job", "tick", "stop",
                "now", "migrate", "App", "cron", "every", "rrule", "at", "validate_rrule",
                "parse_rrule", "validate_cron", "parse_cron",
            ]
        )
    )  # fmt: skip
    on_view = draw(st.booleans())
    target: Any = app.for_tenant(draw(st.builds(lambda t: f"t{t}", st.text("ab", max_size=3))))
    if not on_view:
        target = app
    tenant = {"tenant": draw(st.none() | _tenants)} if draw(st.integers(0, 3)) == 0 else {}
    if name == "schedule":
        args = (draw(jobs), draw(_triggers()))
        kwargs = {"key": draw(_keys), "payload": draw(_payloads), **tenant}
        if draw(st.booleans()):
            kwargs["end"] = draw(_or_anything(_datetimes))
        return name, lambda: target.schedule(*args, **kwargs)
    if name == "defer":
        job = draw(jobs)
        kwargs = {"at": draw(_or_anything(_datetimes)), "payload": draw(_payloads), **tenant}
        if draw(st.booleans()):
            kwargs["key"] = draw(_keys)
        return name, lambda: target.defer(job, **kwargs)
    if name in ("unschedule", "pause", "resume", "trigger"):
        key = draw(_keys)
        return name, lambda: getattr(target, name)(key)
    if name == "backfill":
        key, since, until = (
            draw(_keys),
            draw(_or_anything(_datetimes)),
            draw(_or_anything(_datetimes)),
        )
        return name, lambda: target.backfill(key, since, until)
    if name == "explain":
        key = draw(_keys)
        counts = {k: draw(_counts) for k in ("upcoming", "recent") if draw(st.booleans())}
        return name, lambda: target.explain(key, **counts)
    if name == "schedules":
        if on_view:
            return name, target.schedules
        chosen = draw(st.none() | _tenants)
        return name, lambda: app.schedules(chosen)
    if name == "history":
        options = {k: draw(s) for k, s in _HISTORY.items() if draw(st.booleans())}
        return name, lambda: target.history(**options)
    if name == "for_tenant":
        chosen = draw(_tenants)
        return name, lambda: app.for_tenant(chosen)
    if name == "lock":
        lock_name = draw(st.builds(lambda t: f"lock{t}", _text) | _anything)
        options = {
            k: draw(_or_anything(_timedeltas))
            for k in ("at_most", "at_least")
            if k == "at_most" or draw(st.booleans())
        }
        for k, strategy in _LOCK.items():
            if draw(st.booleans()):
                options[k] = draw(strategy)

        def use_lock() -> None:
            # A name of its own: a blocking lock waiting out an earlier example's at_least
            # would be a wait on purpose, not a hang.
            unique = f"{lock_name}-{uuid.uuid4().hex}" if isinstance(lock_name, str) else lock_name
            lock = app.lock(unique, **options)
            with lock:
                pass

        return name, use_lock
    if name == "job":
        trigger = draw(st.none() | _triggers())
        options = {k: draw(s) for k, s in _JOB.items() if draw(st.booleans())}
        options["name"] = draw(_job_names)
        return name, lambda: app.job(trigger, **options)(_handler)
    if name in ("tick", "now", "migrate"):
        return name, getattr(app, name)
    if name == "stop":
        timeout = draw(_or_anything(_numbers))
        return name, lambda: app.stop(timeout)
    if name == "App":
        url, clock = draw(_anything), draw(st.none() | _anything)
        return name, lambda: oncely.App(url, clock=clock).close()
    if name == "cron":
        expr, tz = draw(_or_anything(_text)), draw(_or_anything(_text))
        return name, lambda: oncely.cron(expr, tz)
    if name == "every":
        units = {
            k: draw(_or_anything(_numbers))
            for k in ("seconds", "minutes", "hours", "days")
            if draw(st.booleans())
        }
        return name, lambda: oncely.every(**units)
    if name == "rrule":
        text = draw(_or_anything(_text))
        options = {k: draw(s) for k, s in _RRULE.items() if draw(st.booleans())}
        return name, lambda: oncely.rrule(text, **options)
    if name == "at":
        when = draw(_or_anything(_datetimes))
        return name, lambda: oncely.at(when)
    text = draw(_or_anything(_text))
    return name, lambda: getattr(oncely, name)(text)


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    made = Target(request.getfixturevalue(name))
    yield made
    made.app.close()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_hostile_arguments_to_every_public_entry_point(target: Target, data: st.DataObject) -> None:
    for _ in range(data.draw(st.integers(1, 4), label="calls")):
        name, call = _operations(target, data)
        raised = _bounded(call)
        if name in ("parse_rrule", "parse_cron"):
            assert raised is None, f"{name} raised {raised!r}; it never raises"
        elif raised is not None:
            assert isinstance(raised, oncely.OncelyError), f"{name} raised {raised!r}"
    target.still_healthy()
