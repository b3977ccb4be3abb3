"""What the commands print: tables for people, JSON for programs, and the words both share.

Tables are plain text, one line per row, sized to the terminal (80 columns when the output is
not a terminal). JSON is one document on stdout and
nothing else; datetimes in it are ISO 8601 with their offset.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import click
from rich.console import Console

from oncely.engine import json_value, printable

NOTHING = "-"


def print_json(document: Any) -> None:
    """Write ``document`` as JSON to stdout; datetimes and dates become ISO 8601 strings."""
    click.echo(json.dumps(document, default=json_value, indent=2, ensure_ascii=False))


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: ``fixed`` (never cut), ``cut`` (at most ``width`` wide, cut with "…") or
    ``wide`` (takes the width left over, cut with "…")."""

    header: str
    kind: Literal["fixed", "cut", "wide"] = "fixed"
    width: int | None = None


def print_table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` as a table, one line per row, as ``kubectl get`` does, in the terminal's
    width (80 columns when the output is not a terminal): a cell too long for its column is cut
    and ends with "…" (--json has every value whole).

    Control characters in a cell are printed as escapes: cells are stored text.
    """
    cells = [[printable(cell) for cell in row] for row in rows]
    widths = [
        max([len(column.header), *(len(row[n]) for row in cells)])
        for n, column in enumerate(columns)
    ]
    for n, column in enumerate(columns):
        if column.kind == "cut" and column.width is not None:
            widths[n] = min(widths[n], max(column.width, len(column.header)))
    room = console().width - _GAP * (len(columns) - 1)
    wide = [n for n, column in enumerate(columns) if column.kind == "wide"]
    wanted = {n: widths[n] for n in wide}
    for n in wide:  # what the cut columns give up room for, down to a floor
        widths[n] = min(widths[n], max(_WIDE_LEAST, len(columns[n].header)))
    cuts = [n for n, column in enumerate(columns) if column.kind == "cut"]
    least = {n: len(columns[n].header) for n in range(len(columns))}
    floor = {n: min(widths[n], max(least[n], _CUT_LEAST)) for n in cuts}
    for shrinking, bound in ((cuts, floor), (wide, least), (cuts, least)):
        while sum(widths) > room:
            if not shrinking:
                break
            most = max(shrinking, key=lambda m: widths[m] - bound[m])
            if widths[most] <= bound[most]:
                break
            widths[most] -= 1
    for n in wide:
        others = sum(width for m, width in enumerate(widths) if m != n)
        widths[n] = max(least[n], min(wanted[n], room - others))
    lines = [_line([c.header for c in columns], widths), _line(["─" * w for w in widths], widths)]
    lines.extend(_line(row, widths) for row in cells)
    click.echo("\n".join(lines))


_GAP = 2
_WIDE_LEAST = 16
_CUT_LEAST = 10


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    fitted = [
        cell if len(cell) <= width else cell[: width - 1] + "…"
        for cell, width in zip(cells, widths, strict=True)
    ]
    return (
        (" " * _GAP)
        .join(cell.ljust(width) for cell, width in zip(fitted, widths, strict=True))
        .rstrip()
    )


def console() -> Console:
    """A console on the current stdout: colour only on a terminal, and never highlighting."""
    return Console(highlight=False, emoji=False, soft_wrap=False)


def when(value: datetime | None) -> str:
    """``value`` for a table: ISO 8601 in UTC to the second (``2026-03-27T09:00:00Z``)."""
    if value is None:
        return NOTHING
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of spaces made single spaces."""
    return " ".join(text.split())
