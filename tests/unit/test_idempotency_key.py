"""Issue 21.2: `run.idempotency_key` is unambiguous for every (tenant, key, time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from oncely.engine import Run
from oncely.model import Claim

WHEN = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def key_of(tenant: str | None, key: str, when: datetime = WHEN) -> str:
    claim = Claim(
        occurrence_id=1, schedule_id=1, tenant=tenant, key=key, job="j", payload=None,
        scheduled_for=when, attempt=1, fence=1, owner="h#1", lease_expires_at=when,
        origin="schedule", run_after=when,
    )  # fmt: skip
    return Run(claim, lambda: when).idempotency_key


def test_idempotency_keys_of_two_tenants_never_collide() -> None:
    # Joined with "/" and nothing escaped, both were "acme/eu/invoice/2026-11-30T09:00:00+00:00".
    assert key_of("acme", "eu/invoice") != key_of("acme/eu", "invoice")
    assert key_of(None, "acme/k") != key_of("acme", "k")
    assert key_of("a%2Fb", "k") != key_of("a/b", "k")


# Characters that delimit or escape, and a few others, so that collisions are likely to be tried.
_parts = st.text(alphabet=st.sampled_from("a/%2F5:+- é"), max_size=8)
_tenants = st.none() | _parts.filter(bool)
_times = st.datetimes(timezones=st.just(UTC)).map(lambda t: t.replace(microsecond=0))


@given(
    st.tuples(_tenants, _parts.filter(bool), _times),
    st.tuples(_tenants, _parts.filter(bool), _times),
)
def test_distinct_tenant_key_time_triples_give_distinct_idempotency_keys(
    one: tuple[str | None, str, datetime], other: tuple[str | None, str, datetime]
) -> None:
    if one != other:
        assert key_of(*one) != key_of(*other)
    else:
        assert key_of(*one) == key_of(*other)


def test_the_same_occurrence_has_the_same_key_in_any_zone() -> None:
    later = WHEN + timedelta(hours=1)
    assert key_of("acme", "k", later) == key_of("acme", "k", later.astimezone(UTC))
