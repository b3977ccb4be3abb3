"""Reading ``--since`` and ``--until``: an ISO date or datetime, or a duration back from now."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import click

from oncely.arguments import DURATIONS, duration
from oncely.cli.output import when

F = TypeVar("F", bound=Callable[..., Any])

FORMS = (
    "an ISO date (2026-03-27), an ISO datetime (2026-03-27T09:00; without an offset it is UTC), "
    f"or a duration back from now: {DURATIONS}"
)

Moment = datetime | timedelta
"""What the option read: an aware instant, or how far back from now (resolved by `at`)."""


def parse_moment(text: str) -> Moment:
    """Read ``text`` as an aware UTC datetime or a duration back from now.

    A date is its midnight UTC; a datetime without an offset is UTC. Raises `ValueError` naming
    the accepted forms.
    """
    back = duration(text)
    if back is not None:
        return back
    try:
        moment = datetime.fromisoformat(text.strip())
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{text!r} is not a time; use {FORMS}") from exc


def at(moment: Moment, now: datetime, option: str) -> datetime:
    """The instant ``moment`` names at ``now``. Raises `click.BadParameter` when it is out of the
    range of datetime (a duration reaching before year 1)."""
    if isinstance(moment, datetime):
        return moment
    try:
        return now - moment
    except OverflowError as exc:
        raise click.BadParameter(
            f"{moment} back from now is before year 1; use {FORMS}", param_hint=option
        ) from exc


def ahead(moment: Moment, now: datetime, option: str) -> datetime:
    """The instant ``moment`` names at ``now``, a duration counting forward (``--until`` of
    `oncely pause`). Raises `click.BadParameter` when it is not after ``now``."""
    try:
        instant = moment if isinstance(moment, datetime) else now + moment
    except OverflowError as exc:
        raise click.BadParameter(f"{moment} from now is past year 9999", param_hint=option) from exc
    if instant <= now:
        raise click.BadParameter(
            f"{when(instant)} is not in the future (now is {when(now)}); pass a later "
            "time, or a duration ahead such as 2h",
            param_hint=option,
        )
    return instant


def _read(ctx: click.Context, param: click.Parameter, value: str | None) -> Moment | None:
    """The click callback that reads ``--since`` and ``--until`` (a bad one is exit status 2)."""
    if value is None:
        return None
    try:
        return parse_moment(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc


def time_option(
    name: str, meaning: str, *, required: bool = False, forward: bool = False
) -> Callable[[F], F]:
    """``--since`` or ``--until`` (``name``): a `Moment`, as parsed by `parse_moment`; a
    duration counts back from now, or ahead with ``forward`` (resolved by `ahead`)."""
    direction = "from now" if forward else "back from now"
    return click.option(
        name,
        metavar="TIME",
        required=required,
        callback=_read,
        help=f"{meaning} An ISO 8601 date or datetime (naive means UTC), or a duration "
        f"{direction}: 30m, 12h, 7d, 2w.",
    )
