"""The names DESIGN.md promises, and the one error root."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import oncely
from oncely import errors

RECURRENCE_API = {
    "cron",
    "every",
    "rrule",
    "at",
    "validate_rrule",
    "parse_rrule",
    "validate_cron",
    "parse_cron",
}
ERRORS = {
    "OncelyError",
    "InvalidSchedule",
    "Terminal",
    "LockHeld",
    "LockUnavailable",
    "StoreUnavailable",
}


def test_recurrence_api_and_errors_are_exported() -> None:
    assert set(oncely.__all__) >= RECURRENCE_API | ERRORS
    for name in oncely.__all__:
        assert getattr(oncely, name) is not None
    for name in RECURRENCE_API:
        assert callable(getattr(oncely, name)), name


def _exported_errors() -> list[str]:
    return sorted(
        name
        for name in oncely.__all__
        if isinstance(getattr(oncely, name), type) and issubclass(getattr(oncely, name), Exception)
    )


def test_every_error_of_errors_py_is_exported() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and issubclass(value, Exception)
        and value.__module__ == errors.__name__
    }
    assert set(_exported_errors()) == defined
    assert len(defined) == 15


@pytest.mark.parametrize("name", _exported_errors())
def test_every_error_is_an_oncely_error_with_a_default_message(name: str) -> None:
    cls = getattr(oncely, name)
    assert issubclass(cls, oncely.OncelyError)
    default = " ".join((cls.__doc__ or "").split())  # the docstring, on one line
    assert default
    assert str(cls()) == default
    assert str(cls("what went wrong, and what to do")) == "what went wrong, and what to do"


def test_errors_built_without_arguments_still_carry_their_data() -> None:
    assert oncely.InvalidSchedule().reason == "The schedule is not valid."
    assert oncely.NaiveDatetime().rule == ""
    assert oncely.TickFailed().step is None
    assert oncely.TickFailed("tick step 'claim' failed", step="claim").step == "claim"
    assert oncely.LockHeld().holder is None


def test_invalid_schedule_carries_rule_reason_and_hint() -> None:
    error = oncely.InvalidSchedule("FREQ is missing", rule="BYDAY=MO", hint="start with FREQ=")
    assert (error.rule, error.reason, error.hint) == (
        "BYDAY=MO",
        "FREQ is missing",
        "start with FREQ=",
    )
    assert str(error) == "'BYDAY=MO': FREQ is missing (start with FREQ=)"
    assert isinstance(error, ValueError)


def test_unknown_schedule_is_also_a_lookup_error() -> None:
    assert issubclass(oncely.UnknownSchedule, LookupError)


def test_locks_and_the_test_clock_are_reachable_as_designed() -> None:
    assert callable(oncely.locks.redis)
    assert oncely.locks.Lock is not None

    clock = oncely.testing.Clock()
    before = clock()
    assert clock.advance(minutes=5) - before == timedelta(minutes=5)
    with pytest.raises(oncely.NaiveDatetime):
        oncely.testing.Clock(datetime(2026, 1, 1))


def _fresh_python(script: str) -> str:
    """What ``script`` prints, run by a new interpreter (whose sys.modules nothing shares)."""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def test_importing_oncely_loads_its_names_only_when_first_used() -> None:
    script = """\
import sys
import oncely
heavy = ("oncely.app", "oncely.engine", "oncely.store", "oncely.locks", "psycopg", "redis")
print(sorted(name for name in heavy if name in sys.modules))
from oncely import App, every, locks
import oncely.app, oncely.locks, oncely.recurrence
print(App is oncely.app.App, every is oncely.recurrence.every, locks is oncely.locks)
print(sorted(set(oncely.__all__) - set(dir(oncely))))
"""
    assert _fresh_python(script).splitlines() == ["[]", "True True True", "[]"]


def test_an_app_and_its_worker_load_redis_only_for_a_redis_lock(tmp_path: Path) -> None:
    # redis-py (and the OpenTelemetry it loads) was a third of a worker's start-up.
    script = f"""\
import sys
import oncely
from datetime import timedelta
from oncely.worker import Worker
app = oncely.App("sqlite:///{tmp_path / "oncely.db"}")
app.lock("nightly", at_most=timedelta(minutes=5))
Worker(app)
print("redis" in sys.modules)
oncely.locks.redis("redis://127.0.0.1:1/0")
print("redis" in sys.modules)
"""
    assert _fresh_python(script).splitlines() == ["False", "True"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Nonexistent'"):
        _ = oncely.Nonexistent  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("blocked", "code", "extra"),
    [
        ("psycopg", "oncely.App('postgresql://postgres@127.0.0.1/x').schedules()", "postgres"),
        ("redis", "oncely.locks.redis('redis://127.0.0.1:6379/0')", "redis"),
    ],
)
def test_a_url_whose_driver_is_not_installed_names_the_extra(
    blocked: str, code: str, extra: str, tmp_path: Path
) -> None:
    """SQLite-only users install no PostgreSQL or Redis driver (``oncely[postgres]`` and
    ``oncely[redis]`` are extras); a URL that needs one says which to install."""
    script = f"""\\
import sys
sys.modules[{blocked!r}] = None  # as if it were not installed
import oncely
app = oncely.App("sqlite:///{tmp_path / "oncely.db"}")
app.schedules()
try:
    {code}
except oncely.ConfigurationError as exc:
    print(exc)
"""
    out = _fresh_python(script)
    assert f"pip install 'oncely[{extra}]'" in out, out
