"""`oncely lint`: the guardrails that keep oncely the one scheduler and boundaries real.

AST-based, configured under ``[tool.oncely.lint]`` in pyproject.toml; one file per rule in
``lint/rules/``, each with its documentation and examples.
"""

from __future__ import annotations

from oncely.lint.config import LintConfig, load_config, read_config
from oncely.lint.engine import lint_files, lint_source, python_files
from oncely.lint.finding import Finding
from oncely.lint.rules import Rule, all_rules

__all__ = [
    "Finding",
    "LintConfig",
    "Rule",
    "all_rules",
    "lint_files",
    "lint_source",
    "load_config",
    "python_files",
    "read_config",
]
