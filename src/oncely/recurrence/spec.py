"""Rebuilding a trigger from the JSON data `Trigger.to_spec` gave, for triggers kept in a store.

The reader is strict about shape: a spec is a mapping with exactly the keys of its kind, each of
its type, and version ``"v": 1``. Anything else raises `InvalidSchedule` naming the problem, and
nothing else is ever raised, so a store can mark one unreadable schedule invalid and go on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from oncely.errors import InvalidSchedule
from oncely.recurrence.crontab import Cron
from oncely.recurrence.interval import Every
from oncely.recurrence.oneoff import At
from oncely.recurrence.rfc5545 import read_stored_rrule
from oncely.recurrence.rule_trigger import RRule
from oncely.recurrence.trigger import SPEC_VERSION, Trigger
from oncely.recurrence.wallclock import DstFold, DstGap, Zone

_NONE = type(None)
_POLICIES = {"dst_gap": str, "dst_fold": str}
# kind: {key: type or types}, beside "kind" and "v"
_REQUIRED: dict[str, dict[str, type | tuple[type, ...]]] = {
    "cron": {"expr": str, "tz": str, **_POLICIES},
    "every": {"seconds": int},
    "at": {"when": str},
    "rrule": {
        "rule": str,
        "start": (str, _NONE),
        "start_wall": (str, _NONE),
        "tz": str,
        "end": (str, _NONE),
        "max_span": (int, _NONE),
        **_POLICIES,
    },
}
_OPTIONAL: dict[str, dict[str, type | tuple[type, ...]]] = {"rrule": {"max_span_us": int}}
_HINT = "store what Trigger.to_spec() returns"


def trigger_from_spec(spec: Mapping[str, Any], *, schedule: str | None = None) -> Trigger:
    """Return the trigger that ``spec`` (from `Trigger.to_spec`, through JSON) describes.

    The result equals the trigger the spec was taken from and computes the same instances, in any
    process. ``schedule`` names the schedule in the log line of an rrule stopped by its max_span.

    Raises `InvalidSchedule`, and only that, for anything else: not a mapping, an unknown
    ``kind``, a ``"v"`` other than 1, a missing or unknown key, a value of the wrong type (a
    bool is not a number), an instant without a UTC offset, or values the trigger refuses.
    """
    if not isinstance(spec, Mapping):
        raise InvalidSchedule(f"a trigger spec is a JSON object, not {_type(spec)}", hint=_HINT)
    kind = spec.get("kind")
    if not isinstance(kind, str) or kind not in _REQUIRED:
        got = "no kind" if kind is None else f"kind {_show(kind)}"
        raise InvalidSchedule(
            f"a trigger spec has a kind, one of {', '.join(_REQUIRED)}; this one has {got}",
            hint=_HINT,
        )
    version = spec.get("v")
    if type(version) is not int or version != SPEC_VERSION:
        got = "no format version" if "v" not in spec else f"format version {_show(version)}"
        newer = type(version) is int and version > SPEC_VERSION
        raise InvalidSchedule(
            f"the {kind} spec has {got}; this oncely reads version {SPEC_VERSION}",
            hint="a newer oncely wrote it; upgrade to read it" if newer else _HINT,
        )
    fields = _fields(kind, spec)
    try:
        return _BUILDERS[kind](fields, schedule)
    except InvalidSchedule:
        raise
    except (OverflowError, ValueError) as exc:  # e.g. a period or an instant past the year 9999
        raise InvalidSchedule(f"the {kind} spec holds an impossible value: {exc}") from exc


def _fields(kind: str, spec: Mapping[Any, Any]) -> dict[str, Any]:
    """Return the spec's values by key, after checking its keys and their types."""
    required, optional = _REQUIRED[kind], _OPTIONAL.get(kind, {})
    missing = [key for key in required if key not in spec]
    if missing:
        raise InvalidSchedule(f"the {kind} spec lacks {_names(missing)}", hint=_HINT)
    unknown = [key for key in spec if key not in ("kind", "v", *required, *optional)]
    if unknown:
        raise InvalidSchedule(f"the {kind} spec has unknown {_names(unknown)}", hint=_HINT)
    fields: dict[str, Any] = {}
    for key, types in {**required, **optional}.items():
        if key not in spec:
            continue
        value = spec[key]
        if isinstance(value, bool) or not isinstance(value, types):
            wanted = " or ".join(
                "null" if t is _NONE else t.__name__
                for t in (types if isinstance(types, tuple) else (types,))
            )
            raise InvalidSchedule(
                f"the {kind} spec's {key} is {_type(value)}, not {wanted}", hint=_HINT
            )
        fields[key] = value
    return fields


def _cron(fields: dict[str, Any], schedule: str | None) -> Trigger:
    return Cron(fields["expr"], fields["tz"], **_policies(fields))


def _every(fields: dict[str, Any], schedule: str | None) -> Trigger:
    return Every(seconds=fields["seconds"])


def _at(fields: dict[str, Any], schedule: str | None) -> Trigger:
    return At(_instant(fields, "when"))


def _rrule(fields: dict[str, Any], schedule: str | None) -> Trigger:
    rule = read_stored_rrule(fields["rule"])
    if rule.start is not None:
        raise InvalidSchedule(
            "the rrule spec's rule has a DTSTART line",
            rule=rule.text,
            hint="give the start as start and start_wall",
        )
    start = None if fields["start"] is None else _instant(fields, "start")
    wall = None if fields["start_wall"] is None else _wall(fields)
    if (start is None) != (wall is None):
        raise InvalidSchedule("the rrule spec gives one of start and start_wall without the other")
    given: datetime | None = start
    if start is not None and Zone(fields["tz"]).wall_of(start)[0] != wall:
        given = wall  # a start in a DST gap: only the wall time keeps what the rule counts from
    trigger = RRule(
        rule,
        given,
        fields["tz"],
        None if fields["end"] is None else _instant(fields, "end"),
        _max_span(fields),
        schedule=schedule,
        **_policies(fields),
    )
    if (trigger.start, trigger.start_wall) != (start, wall):
        raise InvalidSchedule(
            f"the rrule spec's start {fields['start']} and start_wall {fields['start_wall']} "
            f"are not one start in {fields['tz']}",
            rule=rule.text,
            hint="start is the instant start_wall resolves to, in whole seconds",
        )
    return trigger


_BUILDERS: dict[str, Callable[[dict[str, Any], str | None], Trigger]] = {
    "cron": _cron,
    "every": _every,
    "at": _at,
    "rrule": _rrule,
}


def _policies(fields: dict[str, Any]) -> dict[str, Any]:
    # The trigger checks the values; the casts only name the types it checks them against.
    return {
        "dst_gap": cast(DstGap, fields["dst_gap"]),
        "dst_fold": cast(DstFold, fields["dst_fold"]),
    }


def _max_span(fields: dict[str, Any]) -> timedelta | None:
    seconds, micro = fields["max_span"], fields.get("max_span_us")
    if micro is not None and (seconds is None or not 0 < micro < 1_000_000):
        raise InvalidSchedule(
            f"the rrule spec's max_span_us={micro} is not a remainder of 1 to 999999 "
            "microseconds of a max_span",
            hint=_HINT,
        )
    return None if seconds is None else timedelta(seconds=seconds, microseconds=micro or 0)


def _instant(fields: dict[str, Any], key: str) -> datetime:
    moment = _iso(fields, key)
    if moment.utcoffset() is None:
        raise InvalidSchedule(
            f"the spec's {key} {_show(fields[key])} has no UTC offset",
            hint="e.g. 2026-01-05T08:00:00+00:00",
        )
    return moment.astimezone(UTC)


def _wall(fields: dict[str, Any]) -> datetime:
    moment = _iso(fields, "start_wall")
    if moment.tzinfo is not None:
        raise InvalidSchedule(
            f"the spec's start_wall {_show(fields['start_wall'])} has a UTC offset; it is a "
            "wall time in tz",
            hint="e.g. 2026-01-05T09:00:00",
        )
    return moment


def _iso(fields: dict[str, Any], key: str) -> datetime:
    try:
        return datetime.fromisoformat(fields[key])
    except ValueError as exc:
        raise InvalidSchedule(
            f"the spec's {key} {_show(fields[key])} is not an ISO 8601 date and time",
            hint="e.g. 2026-01-05T08:00:00+00:00",
        ) from exc


def _names(keys: list[Any]) -> str:
    shown = ", ".join(_show(key) for key in keys)
    return f"key{'s' if len(keys) > 1 else ''} {shown}"


def _show(value: object) -> str:
    """A short, safe rendering: repr() of a long or hostile value could flood or raise."""
    if isinstance(value, str):
        text = str.__repr__(value)
        return text if len(text) <= 60 else text[:57] + "..."
    # past 4,300 digits str() of an int raises ValueError
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**18:
        return int.__repr__(value)
    return _type(value)


def _type(value: object) -> str:
    return "null" if value is None else f"a {type(value).__name__}"
