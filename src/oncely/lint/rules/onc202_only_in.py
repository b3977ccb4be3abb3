"""ONC202: a confined symbol imported or called outside the modules it is confined to."""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from oncely.errors import ConfigurationError
from oncely.lint.rules.base import Context, Rule

_WHERE = "[tool.oncely.lint.ONC202]"
_EXAMPLE = 'symbols = { "app.events.Engine" = ["app.events.*"] }'


class OnlyIn(Rule):
    """## What it does
    With ``symbols`` configured (``symbols = { "app.events.Engine" = ["app.events.*"] }``: a
    dotted path and the module globs it is confined to), finds the symbol imported, called,
    subclassed or passed to a call in any other module. The module that defines it is always
    allowed. It sees through the ways a name travels within a file:

    - ``from app.events import Engine`` (also ``as E``, relative, or inside a function) is a
      finding at the import; what is then done with that name is covered by it;
    - through the module: ``import app.events as ev; ev.Engine()``, ``app.events.Engine()``,
      ``from app import events; events.Engine()``, ``getattr(ev, "Engine")()``,
      ``importlib.import_module("app.events").Engine()``, and after
      ``from app.events import *``, a bare ``Engine()``: a finding at each call;
    - an alias assigned in the file (``Make = ev.Engine; Make()``), a call of anything reached
      through the symbol (``ev.Engine.from_url(...)``, an alternate constructor), a class
      deriving from it (``class Mine(ev.Engine)``) and the symbol handed to a call that calls
      it later (``tasks.add(ev.Engine)``, ``Thread(target=Make)``).

    Type-only uses are not findings: an import under ``if TYPE_CHECKING:``, annotations,
    ``isinstance`` and ``issubclass`` checks and ``cast``. Names are resolved per file, not per
    scope. Without ``symbols`` the rule is inert.

    ## Why is this bad?
    Some objects must have exactly one maker: the event engine, the scheduler, the database
    pool. A second one built somewhere else runs beside the first and nobody notices until
    both act on the same work. Confining where the symbol may be used keeps that one place
    the only place, and makes a new one a reviewed configuration change.

    ## Example
    ```python
    # app/billing/jobs.py
    from app.events import Engine

    engine = Engine(workers=4)
    ```

    ## Use instead
    ```python
    # app/billing/jobs.py: use the one engine app.events builds
    from app.events import engine
    ```
    """

    code = "ONC202"
    name = "only-in"
    message = "confined symbol used outside its modules"
    violating = "from app.events import Engine  # fires\n\nengine = Engine(workers=4)\n"
    clean = "from app.events import engine\n\nengine.publish('started')\n"
    example_options: ClassVar[Mapping[str, Any]] = {
        "symbols": {"app.events.Engine": ["app.events.*"]}
    }

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        unknown = sorted(set(self.options) - {"symbols"})
        if unknown:
            raise ConfigurationError(f"{_WHERE}: unknown key {unknown[0]!r}; the key is symbols")
        self.symbols = _symbols(self.options.get("symbols", {}))

    @property
    def inert(self) -> bool:
        return not self.symbols

    def visit_Module(self, node: ast.Module, context: Context) -> None:
        confined = tuple(
            symbol
            for symbol, globs in self.symbols.items()
            if not _allowed(context.module, symbol, globs)
        )
        if confined:
            _Scan(self, context, confined).run(node)

    def found(self, symbol: str, node: ast.AST, context: Context, how: str) -> None:
        """Reports ``symbol`` used (``how``: imported, called, subclassed, passed) at ``node``."""
        globs = self.symbols[symbol]
        module = symbol.rpartition(".")[0]
        where = ", ".join(globs) if globs else f"{module}, where it is defined"
        self.report(context, node, f"{symbol} {how} here; it may be used only in {where}")


@dataclass(frozen=True)
class _Bound:
    """What a name in the file stands for; ``reported`` when its import was the finding."""

    path: str
    reported: bool


_TYPE_ONLY_CALLS = {"isinstance", "issubclass", "cast"}


class _Scan:
    """One file: bind names from imports, then aliases, then judge calls and class bases.

    Its own passes, in source order, so a use is judged whatever the order the engine walks
    nodes in and wherever in the file the import that binds it sits."""

    def __init__(self, rule: OnlyIn, context: Context, confined: tuple[str, ...]) -> None:
        self.rule = rule
        self.context = context
        self.confined = confined
        self.bindings: dict[str, _Bound] = {}
        self.stars: list[str] = []

    def run(self, tree: ast.Module) -> None:
        nodes = list(_walk(tree, typing_only=False))
        for node, typing_only in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._import(node, typing_only)
        for node, _ in nodes:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                bound = self._resolve(node.value)
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if bound is not None and isinstance(target, ast.Name):
                        self.bindings[target.id] = bound
        for node, _ in nodes:
            if isinstance(node, ast.Call):
                self._judge(self._resolve(node.func), node, "called")
                self._passed(node)
            elif isinstance(node, ast.ClassDef):
                for base in node.bases:
                    self._judge(self._resolve(base), node, "subclassed")

    def _import(self, node: ast.Import | ast.ImportFrom, typing_only: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                symbol = self._symbol(alias.name)
                if symbol is not None and not typing_only:
                    self.rule.found(symbol, node, self.context, "imported")
                if alias.asname:
                    reported = symbol is not None and not typing_only
                    self.bindings[alias.asname] = _Bound(alias.name, reported)
                else:
                    top = alias.name.partition(".")[0]
                    self.bindings[top] = _Bound(top, reported=False)
            return
        module = self.context.absolute(node.level, node.module)
        if module is None:
            return
        for alias in node.names:
            if alias.name == "*":
                self.stars.append(module)
                continue
            path = f"{module}.{alias.name}"
            symbol = self._symbol(path)
            if symbol is not None and not typing_only:
                self.rule.found(symbol, node, self.context, "imported")
            reported = symbol is not None and not typing_only
            self.bindings[alias.asname or alias.name] = _Bound(path, reported)

    def _passed(self, call: ast.Call) -> None:
        """The symbol handed to a call that calls it later (``tasks.add(ev.Engine)``,
        ``Thread(target=make)``); not the type given to ``isinstance``, ``issubclass``, ``cast``."""
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _TYPE_ONLY_CALLS:
            return
        for value in [*call.args, *(keyword.value for keyword in call.keywords)]:
            if isinstance(value, ast.Starred):
                value = value.value
            if isinstance(value, ast.Name | ast.Attribute):
                bound = self._resolve(value)
                if bound is not None and not bound.path.rpartition(".")[2].startswith("__"):
                    self._judge(bound, value, "passed")

    def _judge(self, bound: _Bound | None, node: ast.AST, how: str) -> None:
        if bound is None or bound.reported:
            return
        symbol = self._symbol(bound.path)
        if symbol is not None:
            self.rule.found(symbol, node, self.context, how)

    def _resolve(self, node: ast.expr) -> _Bound | None:
        """The dotted path ``node`` evaluates to through this file's imports, if it does."""
        if isinstance(node, ast.Name):
            if node.id in self.bindings:
                return self.bindings[node.id]
            for module in self.stars:
                if self._symbol(f"{module}.{node.id}") is not None:
                    return _Bound(f"{module}.{node.id}", reported=False)
            return None
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value)
            return None if base is None else _Bound(f"{base.path}.{node.attr}", base.reported)
        if isinstance(node, ast.Call):
            return self._resolve_call(node)
        return None

    def _resolve_call(self, node: ast.Call) -> _Bound | None:
        """``getattr(module, "Name")`` and ``importlib.import_module("a.b")`` with literals."""
        func = node.func
        if isinstance(func, ast.Name) and func.id == "getattr" and func.id not in self.bindings:
            if len(node.args) < 2:
                return None
            name = node.args[1]
            if not isinstance(name, ast.Constant) or not isinstance(name.value, str):
                return None
            base = self._resolve(node.args[0])
            return None if base is None else _Bound(f"{base.path}.{name.value}", base.reported)
        called = self._resolve(func)
        if called is not None and called.path == "importlib.import_module" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                return _Bound(first.value, reported=False)
        return None

    def _symbol(self, path: str) -> str | None:
        """The confined symbol ``path`` is, or is reached through."""
        for symbol in self.confined:
            if path == symbol or path.startswith(f"{symbol}."):
                return symbol
        return None


def _walk(node: ast.AST, typing_only: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Every node in source order, each with whether it sits under ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        yield child, typing_only
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.body:
                yield statement, True
                yield from _walk(statement, typing_only=True)
            for statement in child.orelse:
                yield statement, typing_only
                yield from _walk(statement, typing_only)
        else:
            yield from _walk(child, typing_only)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _allowed(module: str, symbol: str, globs: tuple[str, ...]) -> bool:
    if module == symbol.rpartition(".")[0]:
        return True
    return any(fnmatch.fnmatchcase(module, glob) for glob in globs)


def _symbols(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise ConfigurationError(
            f'{_WHERE}: symbols must be a table of "module.Name" = [module globs], e.g. {_EXAMPLE}'
        )
    symbols: dict[str, tuple[str, ...]] = {}
    for symbol, globs in value.items():
        parts = symbol.split(".")
        if len(parts) < 2 or not all(part.isidentifier() for part in parts):
            raise ConfigurationError(
                f"{_WHERE}: symbols key {symbol!r} must be a dotted path, module then name, "
                f"e.g. {_EXAMPLE}"
            )
        if not isinstance(globs, list) or not all(isinstance(g, str) and g for g in globs):
            raise ConfigurationError(
                f"{_WHERE}: symbols.{symbol} must be a list of the module globs it may be used "
                f"in, e.g. {_EXAMPLE}"
            )
        symbols[symbol] = tuple(globs)
    return symbols
