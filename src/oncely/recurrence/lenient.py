"""One log line per distinct problem, not one per call."""

from __future__ import annotations

import logging
import threading

_MAX_REMEMBERED = 4096
_seen: set[str] = set()
_lock = threading.Lock()


def warn_once(logger: logging.Logger, key: str, message: str, *args: object) -> None:
    """Log ``message`` at WARNING the first time ``key`` is seen in this process."""
    log_once(logger, logging.WARNING, key, message, *args)


def log_once(logger: logging.Logger, level: int, key: str, message: str, *args: object) -> None:
    """Log ``message`` at ``level`` the first time ``key`` is seen in this process.

    A scheduler re-parses stored rules on every pass; without this, one bad rule would log on every
    tick forever. The memory is bounded: past its size it is forgotten and warnings repeat once.
    """
    with _lock:
        if key in _seen:
            return
        if len(_seen) >= _MAX_REMEMBERED:
            _seen.clear()
        _seen.add(key)
    logger.log(level, message, *args)


def input_key(kind: str, value: object) -> str:
    """A key naming one bad input of ``kind``; repr() of a hostile object may itself raise."""
    return f"{kind}:{value}" if isinstance(value, str) else f"{kind}:<{type(value).__name__}>"
