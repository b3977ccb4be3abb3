"""Locks in Redis or Valkey: `oncely.locks.redis(url)`, for apps whose instances share a Redis.

Each operation is one Lua script, so it is atomic and timed by the Redis server's clock (TIME).
A lock ``name`` lives in two keys: ``<prefix>{<name>}`` holds ``"<token> <owner>"`` and expires
with the lease; ``<prefix>{<name>}:token`` counts acquisitions and never expires, so a token is
never handed out twice, even after the lease key expired or was deleted. (Only losing the counter
itself, by FLUSHDB or a failover to a replica that had not yet received it, could repeat one.)
The braces keep both keys in one Redis Cluster hash slot, and no lock name can spell another
lock's counter key: lease keys end in ``}``, counter keys in ``:token``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from oncely.arguments import redacted
from oncely.errors import ConfigurationError, LockUnavailable
from oncely.locks.provider import LockProvider
from oncely.model import Lease

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

# Server time in ms. TIME comes after every write: before Redis 5 a script could not write once
# it had read the clock.
_NOW_MS = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000)"

# KEYS: lease, counter. ARGV: owner, ttl ms. -> {token, expires ms} or nil when held.
_ACQUIRE = f"""
if redis.call('EXISTS', KEYS[1]) == 1 then return nil end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ' ' .. ARGV[1], 'PX', ARGV[2])
{_NOW_MS}
return {{token, now + tonumber(ARGV[2])}}
"""

# KEYS: lease. ARGV: token, ttl ms. -> new expires ms, or nil when that token does not hold it.
_EXTEND = f"""
local value = redis.call('GET', KEYS[1])
if not value or string.match(value, '^(%d+) ') ~= ARGV[1] then return nil end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
{_NOW_MS}
return now + tonumber(ARGV[2])
"""

# KEYS: lease. ARGV: token, keep ms (0: delete now). -> 1, or 0 when that token does not hold it.
_RELEASE = """
local value = redis.call('GET', KEYS[1])
if not value or string.match(value, '^(%d+) ') ~= ARGV[1] then return 0 end
if tonumber(ARGV[2]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('DEL', KEYS[1])
end
return 1
"""

# KEYS: lease. -> {value, expires ms, pttl} or nil when free.
_HOLDER = f"""
local value = redis.call('GET', KEYS[1])
if not value then return nil end
local pttl = redis.call('PTTL', KEYS[1])
{_NOW_MS}
return {{value, now + pttl, pttl}}
"""


class RedisProvider(LockProvider):
    """Named leases with fencing tokens in Redis (or Valkey), timed by the server's clock.

    One client with a connection pool, shared by all threads; it connects on first use. A call
    waits at most ``timeout`` seconds to connect and ``timeout`` for each reply, and is never
    retried: any Redis error, refused connection or timeout raises `LockUnavailable` and the
    guarded code does not run. Raises `ConfigurationError` for a URL redis-py cannot read or a
    ``timeout`` that is not a positive number of seconds.
    """

    def __init__(self, url: str, *, prefix: str = "oncely:lock:", timeout: float = 2.0) -> None:
        if not isinstance(url, str):
            raise ConfigurationError(f"Redis URL {url!r}: give a string, e.g. redis://host:6379/0")
        if not isinstance(prefix, str):
            raise ConfigurationError(f"Redis key prefix {prefix!r}: give a string")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigurationError(f"Redis timeout={timeout!r}: give seconds > 0")
        self.url = redacted(url)
        self.prefix = prefix
        # Imported here, not with oncely: redis-py (and the OpenTelemetry it pulls in) took a
        # third of a worker's start-up in every app, most of which use no Redis.
        try:
            from redis import Redis
            from redis.backoff import NoBackoff
            from redis.exceptions import RedisError
            from redis.retry import Retry
        except ImportError as exc:
            raise ConfigurationError(
                f"a Redis lock provider needs redis-py, which is not installed ({exc}); install "
                "it with: pip install 'oncely[redis]'"
            ) from exc

        self._failures: tuple[type[Exception], ...] = (RedisError, OSError)
        try:
            self._client = Redis.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                # A retry could outlast the timeout several times over, and a timed-out acquire
                # may have succeeded on the server: fail at once instead.
                retry=Retry(NoBackoff(), 0),
                decode_responses=True,
            )
        except ValueError as exc:
            # Not redis-py's own words: they quote the URL's parts, a piece of the password
            # among them ("Port could not be cast to integer value as 'pa'").
            raise ConfigurationError(
                f"Redis URL {self.url!r} cannot be read; write it as "
                "redis://[user[:password]@]host[:port][/db], with any '/', '?', '#' or '@' of the "
                "password percent-encoded (%2F, %3F, %23, %40)"
            ) from exc
        self._acquire = self._client.register_script(_ACQUIRE)
        self._extend = self._client.register_script(_EXTEND)
        self._release = self._client.register_script(_RELEASE)
        self._holder = self._client.register_script(_HOLDER)

    def acquire(self, name: str, owner: str, ttl: timedelta) -> Lease | None:
        ttl_ms = _ttl_ms(ttl)
        with self._unavailable(name):
            reply = self._acquire(keys=[self._key(name), self._counter(name)], args=[owner, ttl_ms])
        if reply is None:
            return None
        token, expires_ms = reply
        return Lease(name, owner, int(token), _EPOCH + int(expires_ms) * _MS)

    def extend(self, lease: Lease, ttl: timedelta) -> Lease | None:
        ttl_ms = _ttl_ms(ttl)
        with self._unavailable(lease.name):
            reply = self._extend(keys=[self._key(lease.name)], args=[lease.token, ttl_ms])
        if reply is None:
            return None
        return Lease(lease.name, lease.owner, lease.token, _EPOCH + int(reply) * _MS)

    def release(self, lease: Lease, keep: timedelta = timedelta(0)) -> bool:
        keep_ms = _keep_ms(keep)
        with self._unavailable(lease.name):
            reply = self._release(keys=[self._key(lease.name)], args=[lease.token, keep_ms])
        return bool(reply)

    def holder(self, name: str) -> Lease | None:
        with self._unavailable(name):
            reply = self._holder(keys=[self._key(name)])
        if reply is None:
            return None
        value, expires_ms, pttl = reply
        token, _, owner = str(value).partition(" ")
        if not token.isdecimal():
            raise LockUnavailable(
                f"lock {name!r}: Redis at {self.url} holds {value!r} under "
                f"{self._key(name)!r}, which is not an oncely lease; what the lock guards does "
                "not run (fail closed)"
            )
        # No expiry (PTTL -1): something other than oncely wrote the key; it holds until removed.
        expires_at = datetime.max.replace(tzinfo=UTC) if pttl < 0 else _EPOCH + expires_ms * _MS
        return Lease(name, owner, int(token), expires_at)

    def close(self) -> None:
        """Close the pool's connections."""
        self._client.close()

    def _key(self, name: str) -> str:
        return f"{self.prefix}{{{name}}}"

    def _counter(self, name: str) -> str:
        return f"{self._key(name)}:token"

    @contextmanager
    def _unavailable(self, name: str) -> Iterator[None]:
        """Turns any Redis failure into `LockUnavailable`: nobody can tell who holds the lock."""
        try:
            yield
        except self._failures as exc:
            detail = " ".join(str(exc).split()) or "no detail"
            raise LockUnavailable(
                f"lock {name!r}: Redis at {self.url} failed ({type(exc).__name__}: {detail}); "
                "what the lock guards does not run (fail closed)"
            ) from exc

    def __repr__(self) -> str:
        return f"<oncely.locks.RedisProvider {self.url} prefix={self.prefix!r}>"


def redis(url: str, *, prefix: str = "oncely:lock:", timeout: float = 2.0) -> RedisProvider:
    """A lock provider on the Redis or Valkey at ``url`` (``redis://``, ``rediss://`` or
    ``unix://``, as redis-py reads them), e.g. ``app.lock(..., provider=oncely.locks.redis(
    "redis://cache:6379/0"))``. Keys start with ``prefix``; ``timeout`` bounds, in seconds,
    connecting and each reply. See `RedisProvider`."""
    return RedisProvider(url, prefix=prefix, timeout=timeout)


def _ttl_ms(ttl: object) -> int:
    """``ttl`` in whole milliseconds, rounded up; `ConfigurationError` below 1 ms."""
    if not isinstance(ttl, timedelta) or ttl < _MS:
        raise ConfigurationError(f"lock ttl={ttl!r}: give a timedelta of 1 ms or more")
    return -(-ttl // _MS)


def _keep_ms(keep: object) -> int:
    """``keep`` in whole milliseconds, rounded up: a lock's ``at_least`` minus the time it ran
    can leave a fraction of a millisecond, which must keep the lock, not fail the release."""
    if not isinstance(keep, timedelta) or keep < timedelta(0):
        raise ConfigurationError(f"lock keep={keep!r}: give a timedelta of 0 (release now) or more")
    return -(-keep // _MS)
