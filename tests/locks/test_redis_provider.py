"""`oncely.locks.redis(url)`: the lock provider contract, on a real Redis.

Leases here are short (a few hundred ms) and the tests sleep past them: expiry is Redis's own
(PX / PEXPIRE), so it cannot be faked from the client side.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis as redis_py

from _proxy import proxied
from oncely.errors import ConfigurationError, LockUnavailable
from oncely.locks.redis import RedisProvider, redis
from oncely.model import Lease

SHORT = timedelta(milliseconds=200)
LONG = timedelta(seconds=30)
# Past SHORT with room for a loaded machine: Redis expires keys to the millisecond.
PAST_SHORT_S = 0.35
CLOSED_PORT_URL = "redis://watcher:secret@127.0.0.1:1/0"


@pytest.fixture
def provider(redis_url: str) -> Iterator[RedisProvider]:
    made = redis(redis_url)
    yield made
    made.close()


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis_py.Redis]:
    """A plain client on the same db, to look at and tamper with the provider's keys."""
    with redis_py.Redis.from_url(redis_url, decode_responses=True) as client:
        yield client


def lease_key(name: str) -> str:
    """The key holding ``name``'s lease, as the module docstring lays it out."""
    return f"oncely:lock:{{{name}}}"


def near(when: datetime, expected: datetime, *, within: timedelta) -> bool:
    return abs(when - expected) <= within


# --- acquire and holder ---------------------------------------------------------------------


def test_acquire_takes_a_free_lock_and_refuses_it_while_held(provider: RedisProvider) -> None:
    lease = provider.acquire("export", "web-1#42", LONG)

    assert lease is not None
    assert (lease.name, lease.owner) == ("export", "web-1#42")
    assert lease.token >= 1
    assert lease.expires_at.utcoffset() == timedelta(0)
    # The server's clock, not ours; they are the same machine here.
    assert near(lease.expires_at, datetime.now(UTC) + LONG, within=timedelta(seconds=5))
    assert provider.acquire("export", "web-2#7", LONG) is None
    assert provider.acquire("another", "web-2#7", LONG) is not None


def test_holder_names_the_current_lease_and_none_once_free(provider: RedisProvider) -> None:
    assert provider.holder("export") is None
    lease = provider.acquire("export", "host with spaces#1", SHORT)
    assert lease is not None

    held = provider.holder("export")

    assert held is not None
    assert (held.name, held.owner, held.token) == ("export", "host with spaces#1", lease.token)
    assert near(held.expires_at, lease.expires_at, within=timedelta(milliseconds=5))
    time.sleep(PAST_SHORT_S)
    assert provider.holder("export") is None


def test_an_expired_lease_can_be_taken_by_another(provider: RedisProvider) -> None:
    first = provider.acquire("export", "a#1", SHORT)
    assert first is not None
    time.sleep(PAST_SHORT_S)

    second = provider.acquire("export", "b#2", LONG)

    assert second is not None
    assert second.owner == "b#2"


def test_tokens_strictly_increase_after_release_expiry_and_deletion(
    provider: RedisProvider, raw: redis_py.Redis
) -> None:
    tokens: list[int] = []

    def take(ttl: timedelta) -> Lease:
        lease = provider.acquire("export", "a#1", ttl)
        assert lease is not None
        tokens.append(lease.token)
        return lease

    assert provider.release(take(LONG))
    take(SHORT)
    time.sleep(PAST_SHORT_S)  # the lease key expires: the counter must not
    take(LONG)
    assert raw.delete(lease_key("export")) == 1  # someone deletes the lease key by hand
    take(LONG)

    assert tokens == sorted(set(tokens))
    assert len(tokens) == 4


def test_lock_names_never_reach_each_others_keys(provider: RedisProvider) -> None:
    """A name that spells another lock's token counter key, or braces, is just another lock."""
    names = ["a", "a:token", "a}:token", "{a}", "{a}:token", "}", ""]

    leases = [provider.acquire(name, "a#1", LONG) for name in names]

    assert [lease.token if lease else None for lease in leases] == [1] * len(names)
    for name in names:
        held = provider.holder(name)
        assert held is not None
        assert held.name == name


def test_a_key_written_by_something_else_is_reported_not_taken(
    provider: RedisProvider, raw: redis_py.Redis
) -> None:
    raw.set(lease_key("export"), "7 ops-console#1")  # no expiry: held until someone removes it
    raw.set(lease_key("garbage"), "not a lease")

    held = provider.holder("export")

    assert held is not None
    assert (held.owner, held.token) == ("ops-console#1", 7)
    assert held.expires_at == datetime.max.replace(tzinfo=UTC)
    assert provider.acquire("export", "a#1", LONG) is None
    with pytest.raises(LockUnavailable, match="not an oncely lease"):
        provider.holder("garbage")


# --- extend ---------------------------------------------------------------------------------


def test_extend_by_the_holder_moves_the_expiry(provider: RedisProvider) -> None:
    lease = provider.acquire("export", "a#1", SHORT)
    assert lease is not None

    extended = provider.extend(lease, LONG)

    assert extended is not None
    assert (extended.name, extended.owner, extended.token) == ("export", "a#1", lease.token)
    assert extended.expires_at > lease.expires_at + timedelta(seconds=20)
    time.sleep(PAST_SHORT_S)
    assert provider.acquire("export", "b#2", LONG) is None


def test_extend_by_a_stale_lease_returns_none_and_leaves_the_new_holder_alone(
    provider: RedisProvider, raw: redis_py.Redis
) -> None:
    stale = provider.acquire("export", "a#1", SHORT)
    assert stale is not None
    time.sleep(PAST_SHORT_S)
    current = provider.acquire("export", "b#2", timedelta(seconds=10))
    assert current is not None

    assert provider.extend(stale, timedelta(seconds=60)) is None

    held = provider.holder("export")
    assert held is not None
    assert (held.owner, held.token) == ("b#2", current.token)
    assert near(held.expires_at, current.expires_at, within=timedelta(milliseconds=5))
    assert 0 < raw.pttl(lease_key("export")) <= 10_000


def test_extend_after_release_returns_none(provider: RedisProvider) -> None:
    lease = provider.acquire("export", "a#1", LONG)
    assert lease is not None
    assert provider.release(lease)

    assert provider.extend(lease, LONG) is None
    assert provider.holder("export") is None


# --- release --------------------------------------------------------------------------------


def test_release_frees_the_lock_at_once(provider: RedisProvider) -> None:
    lease = provider.acquire("export", "a#1", LONG)
    assert lease is not None

    assert provider.release(lease) is True
    assert provider.holder("export") is None
    assert provider.release(lease) is False  # already released
    assert provider.acquire("export", "b#2", LONG) is not None


def test_release_by_a_stale_holder_returns_false_and_the_new_holder_keeps_it(
    provider: RedisProvider,
) -> None:
    stale = provider.acquire("export", "a#1", SHORT)
    assert stale is not None
    time.sleep(PAST_SHORT_S)
    current = provider.acquire("export", "b#2", LONG)
    assert current is not None

    assert provider.release(stale) is False
    assert provider.release(stale, keep=SHORT) is False

    held = provider.holder("export")
    assert held is not None
    assert (held.owner, held.token) == ("b#2", current.token)
    assert near(held.expires_at, current.expires_at, within=timedelta(milliseconds=5))


def test_release_with_keep_holds_the_lock_for_keep_then_lets_it_expire(
    provider: RedisProvider,
) -> None:
    lease = provider.acquire("export", "a#1", LONG)
    assert lease is not None

    assert provider.release(lease, keep=SHORT) is True

    held = provider.holder("export")
    assert held is not None
    assert held.token == lease.token
    assert held.expires_at < lease.expires_at - timedelta(seconds=20)
    assert provider.acquire("export", "b#2", LONG) is None
    time.sleep(PAST_SHORT_S)
    assert provider.acquire("export", "b#2", LONG) is not None


def test_a_keep_below_one_millisecond_still_releases(provider: RedisProvider) -> None:
    """`Lock.release` passes ``at_least`` minus the time run, which may leave microseconds."""
    lease = provider.acquire("export", "a#1", LONG)
    assert lease is not None

    assert provider.release(lease, keep=timedelta(microseconds=300)) is True
    time.sleep(0.05)
    assert provider.holder("export") is None


# --- bad input ------------------------------------------------------------------------------

BAD_TTLS = [timedelta(0), timedelta(microseconds=999), timedelta(seconds=-1), 5, 0.5, None]


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=repr)
def test_a_ttl_below_one_millisecond_or_not_a_timedelta_is_refused(ttl: object) -> None:
    # A closed port: the check comes before any network, so the error is ConfigurationError.
    provider = redis(CLOSED_PORT_URL)
    lease = Lease("export", "a#1", 1, datetime.now(UTC))

    with pytest.raises(ConfigurationError, match="1 ms"):
        provider.acquire("export", "a#1", ttl)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="1 ms"):
        provider.extend(lease, ttl)  # type: ignore[arg-type]


@pytest.mark.parametrize("keep", [timedelta(milliseconds=-1), 1, None], ids=repr)
def test_a_negative_keep_or_not_a_timedelta_is_refused(keep: object) -> None:
    provider = redis(CLOSED_PORT_URL)
    lease = Lease("export", "a#1", 1, datetime.now(UTC))

    with pytest.raises(ConfigurationError, match="keep"):
        provider.release(lease, keep=keep)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "timeout"),
    [
        ("http://user:secret@cache:6379/0", 2.0),
        (42, 2.0),
        (CLOSED_PORT_URL, 0),
        (CLOSED_PORT_URL, True),
    ],
    ids=["scheme", "not-a-string", "zero-timeout", "bool-timeout"],
)
def test_an_unusable_url_or_timeout_is_refused(url: object, timeout: object) -> None:
    with pytest.raises(ConfigurationError) as raised:
        redis(url, timeout=timeout)  # type: ignore[arg-type]
    assert "secret" not in str(raised.value)


# --- Redis unreachable: fail closed ---------------------------------------------------------

STALE = Lease("export", "a#1", 1, datetime(2030, 1, 1, tzinfo=UTC))
OPERATIONS: dict[str, Callable[[RedisProvider], object]] = {
    "acquire": lambda p: p.acquire("export", "a#1", LONG),
    "extend": lambda p: p.extend(STALE, LONG),
    "release": lambda p: p.release(STALE),
    "release-keep": lambda p: p.release(STALE, keep=SHORT),
    "holder": lambda p: p.holder("export"),
}


@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=OPERATIONS.keys())
def test_every_operation_fails_closed_when_redis_cannot_be_reached(
    operation: Callable[[RedisProvider], object],
) -> None:
    provider = redis(CLOSED_PORT_URL)
    started = time.monotonic()

    with pytest.raises(LockUnavailable) as raised:
        operation(provider)

    assert time.monotonic() - started < 2.5
    message = str(raised.value)
    assert "redis://watcher@127.0.0.1:1/0" in message
    assert "does not run" in message
    assert "secret" not in message
    assert "\n" not in message
    assert isinstance(raised.value.__cause__, redis_py.RedisError)
    provider.close()


def test_the_password_in_a_query_string_stays_out_of_messages() -> None:
    provider = redis("redis://127.0.0.1:1/0?password=secret")

    with pytest.raises(LockUnavailable) as raised:
        provider.holder("export")

    assert "redis://127.0.0.1:1/0" in str(raised.value)
    assert "secret" not in str(raised.value)


def test_a_server_that_never_answers_fails_within_the_timeout_without_retrying() -> None:
    # A listening socket nobody accepts from: the kernel completes the connection, no reply comes.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        provider = redis(f"redis://127.0.0.1:{port}/0", timeout=0.3)
        started = time.monotonic()

        with pytest.raises(LockUnavailable, match="Timeout"):
            provider.acquire("export", "a#1", LONG)

        assert time.monotonic() - started < 1.0  # one try, not redis-py's default ten
        provider.close()


def test_a_cut_connection_fails_closed_and_the_provider_recovers(redis_url: str) -> None:
    with proxied(redis_url) as (proxy, through):
        provider = redis(through)
        try:
            lease = provider.acquire("export", "a#1", LONG)
            assert lease is not None
            proxy.cut()
            with pytest.raises(LockUnavailable):
                provider.holder("export")
            proxy.restore()

            held = provider.holder("export")

            assert held is not None
            assert held.token == lease.token
        finally:
            provider.close()


# --- concurrency and connections ------------------------------------------------------------


def test_racing_acquirers_never_hold_the_lock_together(provider: RedisProvider) -> None:
    deadline = time.monotonic() + 2.0
    guard = threading.Lock()
    inside = [0]
    overlaps = [0]
    counter = [0]
    tokens: list[int] = []
    errors: list[BaseException] = []

    def contend(worker: int) -> None:
        try:
            while time.monotonic() < deadline:
                lease = provider.acquire("export", f"worker#{worker}", LONG)
                if lease is None:
                    time.sleep(0.001)
                    continue
                with guard:
                    inside[0] += 1
                    overlaps[0] += inside[0] > 1
                    tokens.append(lease.token)
                value = counter[0]  # read, yield, write: lost updates if two hold it at once
                time.sleep(0)
                counter[0] = value + 1
                time.sleep(0.001)
                with guard:
                    inside[0] -= 1
                assert provider.release(lease)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=contend, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert overlaps[0] == 0
    assert len(tokens) > 20
    assert counter[0] == len(tokens)
    assert tokens == sorted(set(tokens))  # taken in token order, each token once


def test_close_closes_the_connections_of_the_pool(redis_url: str, raw: redis_py.Redis) -> None:
    def connection_ids() -> set[str]:
        """Connections that ran a script: the provider's (this test's db is its own)."""
        return {str(c["id"]) for c in raw.client_list() if str(c["cmd"]).startswith("eval")}

    before = connection_ids()
    provider = redis(redis_url)
    assert provider.acquire("export", "a#1", LONG) is not None
    opened = connection_ids() - before
    assert opened

    provider.close()

    for _ in range(100):  # the server notices the closed socket a moment later
        if not opened & connection_ids():
            break
        time.sleep(0.01)
    assert not opened & connection_ids()
