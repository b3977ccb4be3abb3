"""`oncely lint`: the guardrails that keep oncely the one scheduler and boundaries real.

AST-based, configured under ``[tool.oncely.lint]`` in pyproject.toml; one file per rule in
``lint/rules/``, each with its documentation and examples.

The names are imported on first use (PEP 562): a warm run, answered by ``oncely.lint.manifest``,
imports neither the engine nor the rules.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from oncely.lint.config import LintConfig, load_config, read_config
    from oncely.lint.engine import lint_files, lint_source, python_files
    from oncely.lint.finding import Finding
    from oncely.lint.rules import Rule, all_rules

__all__ = [
    "Finding",
    "LintConfig",
    "Rule",
    "all_rules",
    "command",
    "lint_files",
    "lint_source",
    "load_config",
    "python_files",
    "read_config",
]

_HOMES = {
    **dict.fromkeys(["LintConfig", "load_config", "read_config"], "oncely.lint.config"),
    **dict.fromkeys(["lint_files", "lint_source", "python_files"], "oncely.lint.engine"),
    "Finding": "oncely.lint.finding",
    **dict.fromkeys(["Rule", "all_rules"], "oncely.lint.rules"),
}


def __getattr__(name: str) -> object:
    if name == "command":  # the `oncely lint` command itself, a submodule
        import importlib

        return importlib.import_module(f"{__name__}.command")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
