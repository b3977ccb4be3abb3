"""What a lint run reports: one finding per violation, printed ``path:line:col: CODE message``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    """One violation of rule ``code`` at ``path:line:col`` (line 1-based, col 1-based)."""

    path: str
    line: int
    col: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"
