"""Distributed locks (ShedLock-style) for code oncely does not schedule, with fencing tokens.

``oncely.locks.redis(url)`` makes the Redis/Valkey provider; ``None`` (the default) is the app's
own database.
"""

from __future__ import annotations

from oncely.locks.lock import RESERVED_LOCK_PREFIX, Lock
from oncely.locks.provider import LockProvider
from oncely.locks.redis import RedisProvider, redis
from oncely.locks.store import StoreProvider

__all__ = [
    "RESERVED_LOCK_PREFIX",
    "Lock",
    "LockProvider",
    "RedisProvider",
    "StoreProvider",
    "redis",
]
