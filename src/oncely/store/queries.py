"""SQL kept in `.sql` files as named blocks, one file per dialect, read once.

A block starts at a line ``-- name: NAME`` and runs to the next such line. Comment lines inside a
block are kept (they explain the query in the file); blank edges are trimmed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

DIALECTS = ("sqlite", "postgres")
_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
#: The first line of a PostgreSQL migration that must run outside a transaction block, as
#: ``CREATE INDEX CONCURRENTLY`` and ``DROP INDEX CONCURRENTLY`` must.
OUTSIDE_A_TRANSACTION = "-- oncely: outside a transaction"


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered, forward-only schema change.

    A transactional migration applies whole or not at all. One marked `OUTSIDE_A_TRANSACTION`
    runs its `statements` one by one, each committed on its own; a process lost between two of
    them leaves the migration unrecorded, and the next start runs every statement again, so each
    must be idempotent (``IF EXISTS``, ``IF NOT EXISTS``).
    """

    version: int
    name: str
    sql: str

    @property
    def transactional(self) -> bool:
        return not self.sql.startswith(OUTSIDE_A_TRANSACTION)

    @property
    def statements(self) -> list[str]:
        """The statements, without comment lines: each ends with ``;`` at the end of a line,
        outside a dollar-quoted body (a function's, a ``DO`` block's)."""
        statements: list[str] = []
        pending: list[str] = []
        quoted = False
        for line in self.sql.splitlines():
            if line.startswith("--"):
                continue
            pending.append(line)
            quoted ^= line.count("$$") % 2 == 1
            if not quoted and line.rstrip().endswith(";"):
                statements.append("\n".join(pending).strip().removesuffix(";").strip())
                pending = []
        if "\n".join(pending).strip():
            statements.append("\n".join(pending).strip())
        return statements


@cache
def queries(dialect: str) -> dict[str, str]:
    """Return the named SQL blocks of ``dialect``; a name defined twice is an error."""
    text = resources.files("oncely.store").joinpath("sql", f"{dialect}.sql").read_text("utf-8")
    found: dict[str, str] = {}
    headers = list(_HEADER.finditer(text))
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        name = header.group(1)
        if name in found:
            raise ValueError(f"{dialect}.sql defines {name!r} twice")
        end = following.start() if following is not None else len(text)
        found[name] = text[header.end() : end].strip()
    return found


@cache
def migrations(dialect: str) -> tuple[Migration, ...]:
    """Return ``dialect``'s migrations in order; their versions must run 1, 2, 3... without gaps."""
    folder = resources.files("oncely.store").joinpath("migrations", dialect)
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match is None:
            continue
        found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise ValueError(
            f"{dialect} migrations are not numbered 1..N: {[m.version for m in found]}"
        )
    return tuple(found)
