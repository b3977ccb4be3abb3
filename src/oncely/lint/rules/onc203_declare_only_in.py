"""ONC203: a declaration of a configured kind (settings, channels) outside the files kept for it.

Also home of `ImportedNames`, what a file's names stand for through its imports and aliases,
which ONC204 shares.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import weakref
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from oncely.errors import ConfigurationError
from oncely.lint.rules.base import Context, Rule

_WHERE = "[tool.oncely.lint.ONC203]"
_EXAMPLE = (
    '{ name = "settings", calls = ["environ.Env"], '
    'bases = ["pydantic_settings.BaseSettings"], files = ["*/settings.py"] }'
)
_KIND_KEYS = ("bases", "calls", "files", "name")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


class ImportedNames:
    """What the names of one file stand for, as dotted names: after ``import pydantic_settings
    as ps``, ``ps.BaseSettings`` stands for ``pydantic_settings.BaseSettings``.

    Flat, not per scope: an import or a plain alias (``Base = ps.BaseSettings``) anywhere in the
    file, in a function or under ``try``/``if``, binds its name everywhere, and a name bound twice
    stands for both, so a fallback import cannot hide the first one. A name bound nowhere stands
    for ``<this module>.<name>``, ``<star module>.<name>`` for each ``from m import *`` and
    ``builtins.<name>``. ``importlib.import_module("m")`` and ``__import__("m")`` stand for ``m``.
    """

    def __init__(self, tree: ast.Module, module: str, is_package: bool) -> None:
        self.module = module
        self.classes: defaultdict[str, list[ast.ClassDef]] = defaultdict(list)
        self._package = module.split(".") if is_package and module else module.split(".")[:-1]
        self._bound: defaultdict[str, set[str]] = defaultdict(set)
        self._stars: list[str] = []
        statements = list(_statements(tree.body))
        # Imports first, then aliases in source order: an alias may name an import made below it.
        for statement in statements:
            if isinstance(statement, ast.ClassDef):
                self.classes[statement.name].append(statement)
            self._bind_import(statement)
        for statement in statements:
            self._bind_alias(statement)

    def qualified(self, node: ast.AST) -> set[str]:
        """The dotted names ``node`` may stand for; empty when it is not a name, an attribute of
        one, a subscript of one (``Base[T]``) or an import call."""
        if isinstance(node, ast.Name):
            if node.id in self._bound:
                return set(self._bound[node.id])
            own = f"{self.module}.{node.id}" if self.module else node.id
            return {own, f"builtins.{node.id}", *(f"{star}.{node.id}" for star in self._stars)}
        if isinstance(node, ast.Attribute):
            return {f"{outer}.{node.attr}" for outer in self.qualified(node.value)}
        if isinstance(node, ast.Subscript):
            return self.qualified(node.value)
        if isinstance(node, ast.Call) and node.args:
            imported = _constant_string(node.args[0])
            called = self.qualified(node.func)
            if imported and "importlib.import_module" in called:
                return {imported}
            if imported and "builtins.__import__" in called:
                fromlist = any(keyword.arg == "fromlist" for keyword in node.keywords)
                return {imported if fromlist else imported.split(".")[0]}
        return set()

    def derives_from(self, node: ast.ClassDef, bases: Iterable[str]) -> str | None:
        """The first of ``bases`` class ``node`` derives from, directly or through classes of
        this file (``class _Base(BaseSettings)`` then ``class S(_Base)``); None if none."""
        return self._derives(node, frozenset(bases), set()) or None

    def _derives(self, node: ast.ClassDef, bases: frozenset[str], seen: set[ast.ClassDef]) -> str:
        seen.add(node)
        for base in node.bases:
            found = sorted(self.qualified(base) & bases)
            if found:
                return found[0]
            local = base.value if isinstance(base, ast.Subscript) else base
            if isinstance(local, ast.Name):
                for parent in self.classes.get(local.id, ()):
                    if parent not in seen and (through := self._derives(parent, bases, seen)):
                        return through
        return ""

    def _bind_import(self, statement: ast.stmt) -> None:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname:
                    self._bound[alias.asname].add(alias.name)
                else:
                    top = alias.name.split(".")[0]
                    self._bound[top].add(top)
        elif isinstance(statement, ast.ImportFrom):
            base = self._absolute(statement.module, statement.level)
            for alias in statement.names:
                if alias.name == "*":
                    self._stars.append(base)
                else:
                    name = f"{base}.{alias.name}" if base else alias.name
                    self._bound[alias.asname or alias.name].add(name)

    def _bind_alias(self, statement: ast.stmt) -> None:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            return
        if not isinstance(value, ast.Name | ast.Attribute | ast.Call):
            return
        meanings = self.qualified(value)
        for target in targets:
            if isinstance(target, ast.Name) and meanings:
                self._bound[target.id] |= meanings

    def _absolute(self, module: str | None, level: int) -> str:
        if not level:
            return module or ""
        package = self._package[: max(len(self._package) - (level - 1), 0)]
        return ".".join([*package, *([module] if module else [])])


# The walk visits one file's nodes in a row: remembering the last file's names spares every
# call and class reading the file's imports again. The context is held weakly so that a new
# file's context, allocated where a finished one was, is never taken for it.
_RECENT: list[tuple[weakref.ref[Context], ImportedNames]] = []


def imported_names(context: Context) -> ImportedNames:
    """The `ImportedNames` of the file being walked, computed once per file and shared."""
    for seen, names in _RECENT:
        if seen() is context:
            return names
    root = context.tree
    tree = root if isinstance(root, ast.Module) else ast.Module(body=[], type_ignores=[])
    names = ImportedNames(tree, context.module, context.path.endswith("__init__.py"))
    _RECENT[:] = [(weakref.ref(context), names)]
    return names


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of ``body``, nested ones (in functions, classes, ``try``...) included."""
    for statement in body:
        yield statement
        for block in ("body", "orelse", "finalbody"):
            inner = getattr(statement, block, None)
            if isinstance(inner, list):
                yield from _statements(inner)
        for clause in (*getattr(statement, "handlers", ()), *getattr(statement, "cases", ())):
            yield from _statements(clause.body)


def _constant_string(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


@dataclass(frozen=True)
class _Kind:
    name: str
    calls: frozenset[str]
    bases: frozenset[str]
    files: tuple[str, ...]

    def allows(self, path: str) -> bool:
        return any(fnmatch.fnmatch(path, pattern) for pattern in self.files)

    def where(self) -> str:
        return " or ".join(self.files)


class DeclarationOutsideItsFiles(Rule):
    """## What it does
    Finds declarations of a configured kind outside the files kept for that kind: a class
    deriving from one of the kind's ``bases``, or a call to one of its ``calls``, in a file
    that matches none of its ``files`` globs (relative to pyproject.toml). Bases and callables
    are matched through the file's imports and aliases (``import pydantic_settings as ps``,
    ``Base = ps.BaseSettings``, ``from .bus import Channel``), through classes of the same file
    deriving from them, and in their dynamic spellings: ``type(name, (Base,), ns)``,
    ``create_model(..., __base__=Base)`` and ``functools.partial(callable, ...)``. Inert until
    kinds are configured:

    ```toml
    [tool.oncely.lint.ONC203]
    kinds = [
      { name = "settings", calls = ["environ.Env"], bases = ["pydantic_settings.BaseSettings"],
        files = ["*/settings.py"] },
    ]
    ```

    ## Why is this bad?
    Settings read in ten places are ten sources of truth: each has its own defaults, its own
    environment prefix and its own idea of what is required, and a deploy that sets one
    variable fixes one of them. Keeping each kind of declaration in its one file keeps one
    answer to "where is this configured?".

    ## Example
    ```python
    # app/billing/views.py
    from pydantic_settings import BaseSettings

    class BillingSettings(BaseSettings):
        stripe_key: str
    ```

    ## Use instead
    ```python
    # app/billing/views.py; BillingSettings is declared in app/settings.py
    from app.settings import settings

    print(settings.stripe_key)
    ```
    """

    code = "ONC203"
    name = "declare-only-in"
    message = "declaration outside the files kept for its kind"
    violating = (
        "from pydantic_settings import BaseSettings\n"
        "\n"
        "\n"
        "class BillingSettings(BaseSettings):\n"
        "    stripe_key: str\n"
    )
    clean = "from app.settings import settings\n\nprint(settings.stripe_key)\n"
    example_options: ClassVar[Mapping[str, Any]] = {
        "kinds": [
            {
                "name": "settings",
                "calls": ["environ.Env", "pydantic_settings.BaseSettings"],
                "bases": ["pydantic_settings.BaseSettings"],
                "files": ["*/settings.py"],
            }
        ]
    }

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        self._kinds = _kinds(self.options)

    @property
    def inert(self) -> bool:
        return not self._kinds

    def visit_ClassDef(self, node: ast.ClassDef, context: Context) -> None:
        kinds = [kind for kind in self._kinds if not kind.allows(context.path)]
        if not kinds:
            return
        names = imported_names(context)
        for kind in kinds:
            base = names.derives_from(node, kind.bases)
            if base:
                self.report(
                    context,
                    node,
                    f"{kind.name} class {node.name} (from {base}) belongs in {kind.where()}",
                )

    def visit_Call(self, node: ast.Call, context: Context) -> None:
        kinds = [kind for kind in self._kinds if not kind.allows(context.path)]
        if not kinds:
            return
        names = imported_names(context)
        called = names.qualified(node.func)
        for kind in kinds:
            declared = _declared_by_call(node, called, kind, names)
            if declared:
                self.report(context, node, f"{kind.name} {declared} belongs in {kind.where()}")


def _declared_by_call(
    node: ast.Call, called: set[str], kind: _Kind, names: ImportedNames
) -> str | None:
    """What the call declares of ``kind`` (for the message), or None."""
    direct = sorted(called & kind.calls)
    if direct:
        return f"made by calling {direct[0]}"
    if "functools.partial" in called and node.args:
        deferred = sorted(names.qualified(node.args[0]) & kind.calls)
        if deferred:
            return f"made by functools.partial({deferred[0]}, ...)"
    bases: list[ast.expr] = []
    if "builtins.type" in called and len(node.args) == 3:
        bases.append(node.args[1])
    bases.extend(keyword.value for keyword in node.keywords if keyword.arg == "__base__")
    for spelled in bases:
        for base in spelled.elts if isinstance(spelled, ast.Tuple | ast.List) else [spelled]:
            found = sorted(names.qualified(base) & kind.bases)
            if not found and isinstance(base, ast.Name):
                found = [
                    derived
                    for local in names.classes.get(base.id, ())
                    if (derived := names.derives_from(local, kind.bases))
                ]
            if found:
                return f"class made at run time from {found[0]}"
    return None


def _kinds(options: Mapping[str, Any]) -> tuple[_Kind, ...]:
    unknown = sorted(set(options) - {"kinds"})
    if unknown:
        raise ConfigurationError(
            f"{_WHERE}: unknown option {unknown[0]!r}; the one option is kinds = [{_EXAMPLE}]"
        )
    tables = options.get("kinds", [])
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise ConfigurationError(f"{_WHERE}: kinds must be a list of tables, e.g. [{_EXAMPLE}]")
    kinds = [_kind(table, f"{_WHERE} kinds[{index}]") for index, table in enumerate(tables)]
    seen: set[str] = set()
    for kind in kinds:
        if kind.name in seen:
            raise ConfigurationError(
                f"{_WHERE}: two kinds are named {kind.name!r}; give each kind one table"
            )
        seen.add(kind.name)
    return tuple(kinds)


def _kind(table: dict[str, Any], where: str) -> _Kind:
    unknown = sorted(set(table) - set(_KIND_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(_KIND_KEYS)}"
        )
    name = table.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f'{where}: name must name the kind, e.g. name = "settings"')
    where = f"{where} ({name})"
    calls, bases = _dotted(table, "calls", where), _dotted(table, "bases", where)
    if not calls and not bases:
        raise ConfigurationError(
            f"{where}: give calls, bases or both: what declares a {name}, "
            f'e.g. bases = ["pydantic_settings.BaseSettings"]'
        )
    files = table.get("files")
    if (
        not isinstance(files, list)
        or not files
        or not all(isinstance(pattern, str) and pattern for pattern in files)
    ):
        raise ConfigurationError(
            f"{where}: files must be a non-empty list of path globs relative to pyproject.toml, "
            f'e.g. files = ["*/settings.py"]'
        )
    return _Kind(name, calls, bases, tuple(files))


def _dotted(table: dict[str, Any], key: str, where: str) -> frozenset[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(
        isinstance(item, str) and _DOTTED.fullmatch(item) for item in value
    ):
        raise ConfigurationError(
            f"{where}: {key} must be a list of dotted names, module included, "
            f'e.g. {key} = ["pydantic_settings.BaseSettings"]'
        )
    return frozenset(value)
