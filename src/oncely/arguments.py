"""The checks of the public API's arguments: each names the argument and says what to pass.

Every store keeps the same keys, tenants and job names, so that an argument refused on one is
refused on both and nothing accepted can make every tick fail later (a NUL in a job name did, on
PostgreSQL, at reconcile; a lone surrogate escaped as UnicodeEncodeError).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast, get_args

from oncely.errors import ConfigurationError, InvalidSchedule
from oncely.model import OccurrenceStatus

# A key and its tenant together are one entry of a PostgreSQL unique index, whose entries hold
# at most about 2,700 bytes; these bounds leave room for both.
KEY_BYTES = 1024
TENANT_BYTES = 256
#: ``explain(upcoming=, recent=)`` and ``history(limit=)`` at most.
MAX_LISTED = 1_000_000
_STATUSES = get_args(OccurrenceStatus)
#: The statuses an occurrence ends in: history of these is pruned, the others never are.
FINAL_STATUSES = ("succeeded", "failed", "skipped", "abandoned", "invalid")
#: The durations `duration` reads, for messages that say what to write.
DURATIONS = "a whole number and m, h, d or w (30m, 12h, 7d, 2w)"
_DURATION = re.compile(r"(\d+)\s*([mhdw])", re.IGNORECASE)
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def duration(text: str) -> timedelta | None:
    """``text`` as a duration: a whole number and m, h, d or w (``"30d"``, ``"12h"``); None when
    it is none (also when it is too long for a timedelta).

    The one reading of a duration: `oncely run --retention`, ``--since 7d``, and the integrations'
    settings (Django's ``ONCELY_RETENTION``) all read it here.
    """
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        return None
    amount, unit = found.groups()
    try:
        return timedelta(**{_UNITS[unit.lower()]: int(amount)})
    except OverflowError:
        return None


@dataclass(frozen=True)
class Retention:
    """How long finished history is kept: ``default``, except for the final statuses that
    ``by_status`` names, each kept as long as it says (longer, as failures often are, or
    shorter)."""

    default: timedelta
    by_status: Mapping[str, timedelta] = field(default_factory=dict)

    def cuts(self, now: datetime) -> tuple[datetime, dict[str, datetime]]:
        """What goes at ``now``: (before what by default, before what for each status named)."""
        return now - self.default, {status: now - kept for status, kept in self.by_status.items()}


def checked_retention(value: Any, name: str = "retention") -> Retention:
    """``value`` as how long history is kept: a positive timedelta, a `duration` such as
    ``"30d"``, or one followed by statuses kept otherwise, ``"30d,failed=90d,skipped=7d"``
    (statuses among `FINAL_STATUSES`); else `ConfigurationError` naming ``name`` and what to
    give."""
    if isinstance(value, Retention):
        return value
    what = (
        f"{name}={shown(value)}: give how long to keep history, a timedelta or {DURATIONS}, "
        f"more than 0, and for statuses kept otherwise STATUS=DURATION after it, as in "
        f'"30d,failed=90d" (statuses: {", ".join(FINAL_STATUSES)})'
    )
    if isinstance(value, timedelta):
        default, parts = value, []
    elif isinstance(value, str):
        first, *parts = (part.strip() for part in value.split(","))
        default = duration(first)  # type: ignore[assignment]
    else:
        raise ConfigurationError(what)
    by_status: dict[str, timedelta] = {}
    for part in parts:
        named, _, text = part.partition("=")
        status, kept = named.strip(), duration(text)
        if status not in FINAL_STATUSES or kept is None or status in by_status:
            raise ConfigurationError(what)
        by_status[status] = kept
    kept_all = [default, *by_status.values()]
    if not all(isinstance(k, timedelta) and k > timedelta(0) for k in kept_all):
        raise ConfigurationError(what)
    return Retention(default, by_status)


def checked_key(key: Any, name: str = "key") -> str:
    """``key`` if it is a key a store can keep; else `InvalidSchedule` naming it as ``name``."""
    if not isinstance(key, str) or not key:
        raise InvalidSchedule(
            f"{name}={shown(key)} is not a schedule key", hint="use a non-empty str"
        )
    _storable(name, key, KEY_BYTES, InvalidSchedule)
    return key


def checked_tenant(tenant: Any) -> str:
    """``tenant`` if it names a tenant; else `InvalidSchedule` naming it.

    The one check of every call that takes a tenant: ``""`` is refused, since the stores keep it
    as "no tenant" (an empty tenant wrote over the schedules of code-declared jobs).
    """
    if not isinstance(tenant, str) or not tenant:
        raise InvalidSchedule(
            f"tenant={shown(tenant)} is not a tenant id",
            hint="use a non-empty str, or tenant=None for no tenant",
        )
    _storable("tenant", tenant, TENANT_BYTES, InvalidSchedule)
    return tenant


def checked_job_name(name: Any) -> str:
    """``name`` if it can name a job (and key its schedule); else `ConfigurationError`."""
    if not isinstance(name, str):
        raise ConfigurationError(f"job name={shown(name)} is not a str; pass name='...'")
    if not name:
        raise ConfigurationError("the job has no name; pass name= to app.job()")
    _storable("job name", name, KEY_BYTES, ConfigurationError)
    return name


def checked_count(name: str, value: Any, *, least: int = 0) -> int:
    """``value`` if it is an int from ``least`` to `MAX_LISTED`; else `ConfigurationError`."""
    if type(value) is not int or not least <= value <= MAX_LISTED:
        raise ConfigurationError(
            f"{name}={shown(value)}: give a whole number from {least} to {MAX_LISTED:,}"
        )
    return value


def checked_status(status: Any) -> OccurrenceStatus | None:
    """``status`` if it is None or an occurrence status; else `ConfigurationError`."""
    if status is not None and (not isinstance(status, str) or status not in _STATUSES):
        raise ConfigurationError(
            f"status={shown(status)} is not an occurrence status; use one of {', '.join(_STATUSES)}"
        )
    return cast("OccurrenceStatus | None", status)


def shown(value: object) -> str:
    """``repr(value)``, cut short: an error message quotes a key, never a megabyte of it."""
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ must not replace the error being reported
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else f"{text[:57]}..."


def redacted(url: object) -> str:
    """``url`` for messages: scheme, user, host, port and path; no password, no query string
    (drivers also read ``?password=``). The user information ends at the last ``@``: a
    password may hold a raw ``/``, ``?`` or ``#`` (split at the first ``/``, the password of
    ``redis://:pa/ss@host`` was shown whole)."""
    text = str(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text.split("?", 1)[0].split("@")[-1]
    userinfo, at, location = rest.rpartition("@")
    user = userinfo.partition(":")[0] if at else ""
    host, slash, path = location.partition("/")
    host = host.split("?", 1)[0].split("#", 1)[0]
    shown_host = f"{user}@{host}" if user else host
    return f"{scheme}://{shown_host}{slash}{path.split('?', 1)[0].split('#', 1)[0]}"


def _storable(
    what: str, text: str, limit: int, error: type[InvalidSchedule] | type[ConfigurationError]
) -> None:
    """Raise ``error`` if ``text`` cannot be stored: PostgreSQL text holds no NUL, UTF-8 no half
    of a surrogate pair, an index entry only so many bytes (SQLite takes all three; both stores
    must refuse the same)."""
    why = None
    if "\x00" in text:
        why = "holds a NUL character"
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            why = "holds half of a surrogate pair, which is not text"
        else:
            if size > limit:
                why = f"is {size} bytes long as UTF-8"
    if why is None:
        return
    message = f"{what}={shown(text)} {why}"
    hint = f"use at most {limit} bytes of UTF-8 text without NUL characters"
    if error is InvalidSchedule:
        raise InvalidSchedule(message, hint=hint)
    raise ConfigurationError(f"{message}; {hint}")
