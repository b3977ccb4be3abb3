"""What a lint run reports: one finding per violation, printed ``path:line:col: CODE message``."""

from __future__ import annotations

from dataclasses import dataclass, field

#: A finding's level: an ``error`` fails the run; a ``note`` (a file this Python cannot parse
#: but the project's target version can) is shown and does not.
ERROR, NOTE = "error", "note"


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    """One violation of rule ``code`` at ``path:line:col`` (line 1-based, col 1-based).

    ``justification`` is the reason of the suppression that silenced it (None: not
    suppressed); a run shows suppressed findings only in SARIF, which keeps them as such.
    """

    path: str
    line: int
    col: int
    code: str
    message: str
    justification: str | None = field(default=None, compare=False)
    level: str = field(default=ERROR, compare=False)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"
