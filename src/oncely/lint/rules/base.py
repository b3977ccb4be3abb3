"""What every rule is: a code, a message, examples, and handlers for the node types it checks.

All rules share one walk of each file's tree: the engine calls ``visit_<NodeType>(node, context)``
on every rule that defines it, so a rule costs nothing on nodes it does not look at. A rule's
docstring is its documentation, in the sections What it does / Why is this bad? / Example /
Use instead; ``violating`` and ``clean`` are its examples, the tests run them and ``--prove``
plants ``violating`` to show the rule firing.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from oncely.lint.finding import Finding


@dataclass
class Context:
    """The file being walked: its path as reported, module name, source lines, tree and parents."""

    path: str
    module: str
    lines: list[str]
    #: The configuration root, for rules that read other files of the project.
    root: Path | None = None
    #: The whole file's tree (the walk's root).
    tree: ast.AST | None = None
    findings: list[Finding] = field(default_factory=list)
    _parents: dict[ast.AST, ast.AST] | None = field(default=None, init=False, repr=False)

    @property
    def parents(self) -> dict[ast.AST, ast.AST]:
        """Each node's parent, mapped on first use: most files never need it."""
        if self._parents is None:
            self._parents = {}
            if self.tree is not None:
                for node in ast.walk(self.tree):
                    for child in ast.iter_child_nodes(node):
                        self._parents[child] = node
        return self._parents

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(node)

    def absolute(self, level: int, module: str | None) -> str | None:
        """The absolute module ``from <level dots><module> import ...`` names in this file, or
        None when it climbs above the top-level package."""
        if level == 0:
            return module
        package = [part for part in self.module.split(".") if part]
        if Path(self.path).name != "__init__.py":
            package = package[:-1]
        if level - 1 > len(package):
            return None
        parts = package[: len(package) - (level - 1)] + (module.split(".") if module else [])
        return ".".join(parts) or None

    def ancestors(self, node: ast.AST) -> list[ast.AST]:
        found = []
        current = self.parents.get(node)
        while current is not None:
            found.append(current)
            current = self.parents.get(current)
        return found


def module_name(shown: str) -> str:
    """The module a file is taken for, from its path as reported (`Context.path`): a leading
    ``src/`` is not part of it, a package's ``__init__`` is the package. It depends on where
    the run started, not only on the file."""
    parts = [p for p in Path(shown).with_suffix("").parts if p not in {".", ""}]
    if parts and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class Rule:
    """Base of every rule; subclasses set the class variables and define ``visit_*`` methods."""

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    #: A module the rule fires on (the planted violation of ``--prove``), and its firing lines.
    violating: ClassVar[str]
    clean: ClassVar[str]
    #: The options ``--prove`` and the rule's tests configure it with, when it needs some.
    example_options: ClassVar[Mapping[str, Any]] = {}
    #: Codes of the rules that must run beside this one for ``violating`` to fire (a rule on
    #: other rules' findings); ``--prove`` and the tests run them too.
    companions: ClassVar[tuple[str, ...]] = ()
    #: Words without one of which in a file's text the rule cannot fire there, so the walk
    #: skips it (empty: every file). Each must be shown to hold for every way the rule fires.
    triggers: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        """``options`` is the rule's ``[tool.oncely.lint.<CODE>]`` table; a rule with options
        checks them here and raises `ConfigurationError` naming the key and the fix."""
        self.options: Mapping[str, Any] = options or {}

    @property
    def inert(self) -> bool:
        """Whether the rule, as configured, can fire nowhere: the walk then skips it. True for
        a rule that needs options (its docstring says it is inert without them) and has none."""
        return False

    def report(self, context: Context, node: ast.AST, detail: str = "") -> None:
        message = f"{self.message}{': ' + detail if detail else ''}"
        context.findings.append(
            Finding(
                context.path,
                getattr(node, "lineno", 1),
                getattr(node, "col_offset", 0) + 1,
                self.code,
                message,
            )
        )
