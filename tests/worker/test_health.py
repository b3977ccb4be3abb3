"""Health: /healthz is 200 only while the last tick succeeded, on time (DESIGN lesson 10)."""

from __future__ import annotations

import math

import pytest
from _worker_support import FakeClock

from oncely.errors import ConfigurationError
from oncely.worker.health import Health


def test_before_the_first_tick_it_is_failing() -> None:
    assert Health(60.0, clock=FakeClock()).status() == (
        503,
        {"status": "failing", "reason": "no tick has succeeded yet"},
    )


def test_ok_while_ticks_succeed_within_the_expected_interval_then_failing_when_late() -> None:
    clock = FakeClock()
    health = Health(60.0, clock=clock)
    health.tick_succeeded()
    assert health.status() == (200, {"status": "ok", "last_tick_age_s": 0.0})
    clock.advance(60.0)
    assert health.status() == (200, {"status": "ok", "last_tick_age_s": 60.0})
    clock.advance(1.25)
    assert health.status() == (
        503,
        {"status": "failing", "reason": "no successful tick for 61.2 s (expected every 60 s)"},
    )
    health.tick_succeeded()
    clock.advance(0.1234)
    assert health.status() == (200, {"status": "ok", "last_tick_age_s": 0.123})


def test_a_failed_tick_is_failing_at_once_until_a_tick_succeeds() -> None:
    clock = FakeClock()
    health = Health(60.0, clock=clock)
    health.tick_succeeded()
    clock.advance(1.0)
    health.tick_failed("StoreUnavailable: connection refused")
    assert health.status() == (
        503,
        {"status": "failing", "reason": "last tick failed: StoreUnavailable: connection refused"},
    )
    health.tick_succeeded()
    assert health.status()[0] == 200


def test_a_failure_before_any_success_names_the_failure() -> None:
    health = Health(60.0, clock=FakeClock())
    health.tick_failed("TickFailed: materialise")
    assert health.status() == (
        503,
        {"status": "failing", "reason": "last tick failed: TickFailed: materialise"},
    )


@pytest.mark.parametrize("interval", [0.0, -1.0, math.nan])
def test_the_expected_interval_must_be_positive(interval: float) -> None:
    with pytest.raises(ConfigurationError, match="positive number of seconds"):
        Health(interval)
