"""Distributed locks (ShedLock-style) for code oncely does not schedule, with fencing tokens."""

from __future__ import annotations

from oncely.locks.provider import LockProvider

__all__ = ["LockProvider"]
