"""What the rule tests share: run one rule over a snippet, and read a fixture's `# fires` lines.

Imported by name (a module named conftest would be ambiguous)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from oncely.lint import LintConfig, lint_source

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fired(
    code: str,
    source: str,
    *,
    options: dict[str, Any] | None = None,
    path: str = "app/module.py",
    root: Path | None = None,
) -> list[int]:
    """The lines where rule ``code`` fires in ``source`` (dedented), checked as ``path``."""
    config = LintConfig(
        root=root or Path("/nonexistent"),
        select=(code,),
        options={code: options} if options else {},
    )
    findings = lint_source(Path(path), textwrap.dedent(source), config)
    return [f.line for f in findings if f.code == code]


def marked(fixture: Path) -> list[int]:
    """The lines of ``fixture`` that end with the comment ``# fires``."""
    return [
        n
        for n, line in enumerate(fixture.read_text().splitlines(), start=1)
        if line.rstrip().endswith("# fires")
    ]
