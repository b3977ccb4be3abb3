"""Outage: backoff, and an outage's log is one ERROR, a line per 30 repeats and a recovery line."""

from __future__ import annotations

import logging

import pytest
from _worker_support import FakeClock

from oncely.errors import StoreUnavailable
from oncely.worker.outage import Outage, one_line


def _raised(message: str) -> StoreUnavailable:
    """An exception with a traceback, as the loop catches it."""
    try:
        raise StoreUnavailable(message)
    except StoreUnavailable as exc:
        return exc


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="oncely")


def _levels(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [r.levelno for r in caplog.records]


def test_an_outage_logs_its_first_failure_then_one_line_per_30_repeats_then_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    outage = Outage(clock=clock)
    assert (outage.failing, outage.failures, outage.since) == (False, 0, None)

    outage.failed(_raised("connection refused"), "tick")
    assert _levels(caplog) == [logging.ERROR]
    first = caplog.records[0]
    assert first.name == "oncely"
    assert first.exc_info is not None
    assert first.exc_info[1] is not None
    assert first.exc_info[2] is not None  # the traceback itself, not just the message
    assert first.getMessage().startswith(
        "oncely: tick failed: StoreUnavailable: connection refused; retrying in 0.5 s"
    )
    assert (outage.failing, outage.failures, outage.since) == (True, 1, 1000.0)

    for _ in range(29):  # repeats 1..29: silent
        clock.advance(1.0)
        outage.failed(_raised("connection refused"), "tick")
    assert len(caplog.records) == 1

    clock.advance(1.0)
    outage.failed(_raised("connection refused\nDETAIL: is the server running?"), "tick")
    assert len(caplog.records) == 2
    assert caplog.records[1].levelno == logging.WARNING
    assert caplog.records[1].exc_info is None
    assert caplog.records[1].getMessage() == (
        "oncely: tick still failing: 31 failures in 30 s: "
        "StoreUnavailable: connection refused DETAIL: is the server running?"
    )

    for _ in range(90):  # failures 32..121: one more line at 61, 91 and 121
        clock.advance(0.5)
        outage.failed(_raised("timeout"), "store")
    warnings = [r.getMessage() for r in caplog.records[1:]]
    assert len(warnings) == 4
    assert warnings[1:] == [
        f"oncely: store still failing: {n} failures in {s} s: StoreUnavailable: timeout"
        for n, s in [(61, 45), (91, 60), (121, 75)]
    ]

    clock.advance(2.25)
    outage.recovered()
    assert len(caplog.records) == 6
    assert caplog.records[5].levelno == logging.WARNING
    assert caplog.records[5].getMessage() == "oncely: store recovered after 121 failures in 77.2 s"
    assert (outage.failing, outage.failures, outage.since) == (False, 0, None)


def test_recovered_without_an_outage_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage(clock=FakeClock())
    outage.recovered()
    outage.failed(_raised("down"), "tick")
    outage.recovered()
    outage.recovered()
    assert _levels(caplog) == [logging.ERROR, logging.WARNING]


def test_the_next_outage_starts_afresh(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    outage = Outage(clock=clock)
    for _ in range(5):
        outage.failed(_raised("down"), "tick")
    outage.recovered()
    clock.advance(100.0)
    assert outage.failed(_raised("down again"), "tick") == 0.5
    assert outage.since == 1100.0
    assert _levels(caplog) == [logging.ERROR, logging.WARNING, logging.ERROR]
    assert "down again" in caplog.records[2].getMessage()


def test_backoff_doubles_from_half_a_second_and_caps_at_30_seconds() -> None:
    outage = Outage(clock=FakeClock())
    waits = [outage.failed(_raised("down"), "tick") for _ in range(9)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_backoff_base_and_cap_are_injectable_and_huge_counts_stay_at_the_cap() -> None:
    outage = Outage(base_s=1.0, cap_s=5.0, clock=FakeClock())
    assert [outage.delay(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert outage.delay(10_000) == 5.0  # a week of failures must not overflow a float


def test_report_every_is_injectable(caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage(report_every=2, clock=FakeClock())
    for _ in range(5):
        outage.failed(_raised("down"), "tick")
    assert _levels(caplog) == [logging.ERROR, logging.WARNING, logging.WARNING]


def test_one_line_collapses_a_multi_line_error_and_names_a_bare_one() -> None:
    assert one_line(OSError("a\n  b\tc ")) == "OSError: a b c"
    assert one_line(KeyboardInterrupt()) == "KeyboardInterrupt"
