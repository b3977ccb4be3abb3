"""What the commands print: tables for people, JSON for programs, and the words both share.

Tables are rich tables sized to the terminal (80 columns when the output is not a terminal) and
plain text, with no colour, when the output is not a terminal. JSON is one document on stdout and
nothing else; datetimes in it are ISO 8601 with their offset.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

import click
from cronsim import CronSim
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from oncely.model import Occurrence
from oncely.recurrence import At, Cron, Every, RRule, Trigger

NOTHING = "-"


def print_json(document: Any) -> None:
    """Write ``document`` as JSON to stdout; datetimes and dates become ISO 8601 strings."""
    click.echo(json.dumps(document, default=_json_value, indent=2, ensure_ascii=False))


def _json_value(value: object) -> Any:
    if isinstance(value, date):  # datetimes too
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: ``fold`` (at most ``width`` wide, long words folded), ``fixed`` (never
    wrapped) or ``wide`` (takes the width left over and wraps at words)."""

    header: str
    kind: Literal["fixed", "fold", "wide"] = "fixed"
    width: int | None = None


def print_table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` as a table; a cell (or header) may hold a second line, indented by one.

    Cells are plain text: brackets in a key or an error are not markup.
    """
    table = Table(
        box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True, expand=False
    )
    for column in columns:
        if column.kind == "fixed":
            table.add_column(column.header, no_wrap=True)
        else:
            table.add_column(column.header, overflow="fold", max_width=column.width)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    out = console()
    with out.capture() as captured:
        out.print(table)
    # rich pads every line to the table's width; a pipe or a file is better without the spaces
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def stacked(first: str, second: str) -> str:
    """Two values in one cell: ``second`` on the line under ``first``, indented by one."""
    return f"{first}\n {second}"


def console() -> Console:
    """A console on the current stdout: colour only on a terminal, and never highlighting."""
    return Console(highlight=False, emoji=False, soft_wrap=False)


def when(value: datetime | None) -> str:
    """``value`` for a table: ISO 8601 in UTC to the second (``2026-03-27T09:00:00Z``)."""
    if value is None:
        return NOTHING
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def when_on(value: datetime | None, day: datetime) -> str:
    """``value`` for a table beside ``day``: only its UTC time of day when on the same UTC date."""
    if value is None:
        return NOTHING
    if value.astimezone(UTC).date() == day.astimezone(UTC).date():
        return value.astimezone(UTC).strftime("%H:%M:%S")
    return when(value)


def summary(error: str | None, limit: int | None = None) -> str:
    """The line of an error that says what went wrong, cut to ``limit`` characters.

    A plain message gives its first line. A traceback (errors are stored as such) gives the
    first line of its exception, after the last indented frame line: its own first line is
    always "Traceback (most recent call last):", which says nothing.
    """
    lines = (error or "").splitlines()
    frames = [n for n, line in enumerate(lines) if line[:1].isspace()]
    after = lines[frames[-1] + 1 :] if frames else lines
    text = next((line.strip() for line in after if line.strip()), "")
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of spaces made single spaces."""
    return " ".join(text.split())


def trigger_text(trigger: Trigger | None) -> str:
    """What ``trigger`` does, in words: ``At 09:00 on Monday through Friday (Europe/Berlin)``."""
    if trigger is None:
        return "unreadable"
    if isinstance(trigger, Cron):
        return f"{explain_cron(trigger.expr)} ({trigger.zone.name})"
    if isinstance(trigger, Every):
        return "every " + _period(trigger.period)
    if isinstance(trigger, RRule):
        return f"RRULE {trigger.rule.text} ({trigger.zone.name})"
    if isinstance(trigger, At):
        return "once at " + when(trigger.when)
    return repr(trigger)


def explain_cron(expr: str) -> str:
    """A cron expression in words (``At 02:30 every day``), or the expression itself."""
    try:
        return CronSim(expr, datetime(2000, 1, 1)).explain()  # noqa: DTZ001 (naive wall time)
    except Exception:  # an explanation is a courtesy; never fail a command over it
        return expr


def _period(period: timedelta) -> str:
    seconds = int(period.total_seconds())
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    if len(parts) == 1 and parts[0].startswith("1 "):
        return parts[0][2:]
    return " ".join(parts)


def occurrence_document(occurrence: Occurrence) -> dict[str, Any]:
    """Every field of ``occurrence``, for JSON: the error whole, the local wall time naive."""
    return asdict(occurrence)
