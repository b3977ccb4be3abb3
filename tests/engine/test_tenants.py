"""Lesson 14: tenant data is isolated, and the isolation is test-locked."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import oncely
from oncely.testing import Clock


def test_a_schedule_written_under_one_tenant_is_invisible_to_another(
    app: oncely.App, clock: Clock, remind: oncely.Job
) -> None:
    acme, globex = app.for_tenant("acme"), app.for_tenant("globex")
    acme.schedule(remind, oncely.every(minutes=1), key="r", payload={"secret": "acme"})
    clock.advance(minutes=1)
    app.tick()

    assert [s.key for s in acme.schedules()] == ["r"]
    assert globex.schedules() == []
    assert globex.history() == []
    assert globex.history(key="r") == []
    with pytest.raises(oncely.UnknownSchedule):
        globex.pause("r")
    with pytest.raises(oncely.UnknownSchedule):
        globex.unschedule("r")
    with pytest.raises(oncely.UnknownSchedule):
        globex.trigger("r")
    with pytest.raises(oncely.UnknownSchedule):
        app.pause("r")  # the unbound app's keys are the no-tenant space
    assert [o.tenant for o in acme.history()] == ["acme"]


def test_the_same_key_in_two_tenants_is_two_schedules(
    app: oncely.App, clock: Clock, remind: oncely.Job
) -> None:
    seen: list[tuple[str | None, object]] = []

    @app.job()
    def note(run: oncely.Run) -> None:
        seen.append((run.tenant, run.payload))

    for tenant in ("acme", "globex"):
        app.for_tenant(tenant).defer(note, at=clock(), key="k", payload=tenant)
    app.tick()
    assert sorted(seen) == [("acme", "acme"), ("globex", "globex")]  # type: ignore[type-var]
    app.for_tenant("acme").unschedule("k")
    assert [s.tenant for s in app.schedules()] == ["globex"]


def test_writing_to_another_tenant_through_a_view_is_refused(
    app: oncely.App, clock: Clock, remind: oncely.Job
) -> None:
    acme = app.for_tenant("acme")
    with pytest.raises(oncely.TenantMismatch, match="for_tenant"):
        acme.schedule(remind, oncely.every(minutes=1), key="r", tenant="globex")
    with pytest.raises(oncely.TenantMismatch):
        acme.defer(remind, at=clock() + timedelta(minutes=1), tenant="globex")
    assert app.schedules() == []


def test_an_empty_tenant_cannot_hijack_a_code_declared_schedule(
    app: oncely.App, clock: Clock, remind: oncely.Job
) -> None:
    ran: list[str] = []

    @app.job(oncely.every(minutes=1))
    def nightly_billing(run: oncely.Run) -> None:
        ran.append("billing")

    app.tick()
    # "" was stored as "no tenant" while the guard checked only None.
    with pytest.raises(oncely.InvalidSchedule, match="tenant=''"):
        app.schedule(remind, oncely.every(hours=5), key="nightly_billing", tenant="")
    with pytest.raises(oncely.InvalidSchedule, match="tenant=''"):
        app.defer(remind, at=clock(), key="nightly_billing", tenant="")
    (declared,) = app.schedules()
    assert (declared.job, declared.trigger) == ("nightly_billing", oncely.every(minutes=1))
    clock.advance(minutes=1)
    app.tick()
    assert ran == ["billing"]


@pytest.mark.parametrize(
    ("tenant", "says"),
    [("", "tenant=''"), (5, "tenant=5 is not"), (b"acme", "tenant=b'acme' is not"),
     ("a\x00", "NUL"), ("\ud800", "surrogate"), ("t" * 257, "257 bytes")],
)  # fmt: skip
def test_tenant_ids_are_validated_the_same_everywhere(
    app: oncely.App, clock: Clock, remind: oncely.Job, tenant: object, says: str
) -> None:
    bad: Any = tenant
    calls = {
        "schedule": lambda: app.schedule(remind, oncely.every(hours=1), key="k", tenant=bad),
        "defer": lambda: app.defer(remind, at=clock(), key="k", tenant=bad),
        "for_tenant": lambda: app.for_tenant(bad),
        "schedules": lambda: app.schedules(tenant=bad),
        "view.schedule": lambda: app.for_tenant("acme").schedule(
            remind, oncely.every(hours=1), key="k", tenant=bad
        ),
        "view.defer": lambda: app.for_tenant("acme").defer(remind, at=clock(), key="k", tenant=bad),
    }
    for name, call in calls.items():
        with pytest.raises(oncely.InvalidSchedule, match=says) as raised:
            call()
        assert not isinstance(raised.value, oncely.TenantMismatch), name
    assert app.schedules() == []
