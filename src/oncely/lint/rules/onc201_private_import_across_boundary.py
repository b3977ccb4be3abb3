"""ONC201: importing another boundary's internals instead of what its package publishes."""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from oncely.errors import ConfigurationError
from oncely.lint.rules.base import Context, Rule

_WHERE = "[tool.oncely.lint.ONC201]"
_KEYS = ("api", "attributes", "boundaries", "outside")


@dataclass(frozen=True)
class _Interface:
    """What one published module offers: the names it publishes (None when they cannot be read
    or enumerated) and the submodules found beside it on disk."""

    names: frozenset[str] | None
    submodules: frozenset[str]


class PrivateImportAcrossBoundary(Rule):
    """## What it does
    With ``boundaries`` configured (module globs; each module a glob matches is one boundary,
    e.g. ``app.modules.*`` makes ``app.modules.billing`` and ``app.modules.orders`` two), finds
    imports of one boundary's internals from outside it. A boundary publishes what its
    ``__init__`` exports (defines, imports, or lists in ``__all__``; a name with a leading
    underscore only when ``__all__`` lists it) and, with ``api = "api"``, its ``api`` submodule
    and that module's exports. Anything else of another boundary is private:

    - ``import app.modules.billing.models`` and ``from app.modules.billing.models import X``
      (a module below the published ones, also through relative imports, lazy imports in
      functions, ``if TYPE_CHECKING:`` blocks and ``importlib.import_module("...")``);
    - ``from app.modules.billing import models`` when ``models`` is a submodule the
      ``__init__`` does not export, and ``from app.modules.billing import X`` when the
      ``__init__`` does not export ``X``.

    The ``__init__`` is read from disk under the configuration root, at ``<root>/<path>`` or
    ``<root>/src/<path>``; when it cannot be read, only imports of submodules are findings.
    Imports within one boundary are never findings. Modules outside every boundary may not
    reach into one either, unless ``outside = "allow"`` (default ``"deny"``). Relative imports
    are resolved against the importing module. Without ``boundaries`` the rule is inert.

    With ``attributes = "module"``, a module inside a boundary also may not read another
    module's private names through an object: ``app._engine``, ``self.app._sync_clock()``
    where ``_engine`` and ``_sync_clock`` (a leading underscore, not a dunder) are defined,
    as a function, class, method or attribute (``self._engine = ...``), only in other modules
    of the boundaries' packages, read from disk under the configuration root. Reads through
    ``self`` and ``cls``, and of names no module there defines (``os._exit``), are not
    findings.

    ## Why is this bad?
    A boundary's package is its contract: what it exports may be relied on, everything else
    may change without notice. An import of its internals couples two modules through code
    neither team agreed to keep stable, and the boundary becomes a suggestion.

    ## Example
    ```python
    # app/modules/orders/checkout.py
    from app.modules.billing.models import Invoice
    ```

    ## Use instead
    ```python
    # app/modules/orders/checkout.py; app/modules/billing/__init__.py exports Invoice
    from app.modules.billing import Invoice
    ```
    """

    code = "ONC201"
    name = "private-import-across-boundary"
    message = "private import across a boundary"
    violating = "from app.modules.billing.models import Invoice  # fires\n"
    clean = "from app.modules.billing import Invoice\n"
    example_options: ClassVar[Mapping[str, Any]] = {"boundaries": ["app.modules.*"]}

    def __init__(
        self, options: Mapping[str, Any] | None = None, *, root: Path | None = None
    ) -> None:
        """``root`` is the configuration root the boundaries' ``__init__`` files are read under;
        without it no export is known and only imports of submodules are findings."""
        super().__init__(options)
        unknown = sorted(set(self.options) - set(_KEYS))
        if unknown:
            raise ConfigurationError(
                f"{_WHERE}: unknown key {unknown[0]!r}; the keys are {', '.join(_KEYS)}"
            )
        self.boundaries = _globs(self.options.get("boundaries", []))
        self.api = _api(self.options.get("api"))
        self.outside_allowed = _outside(self.options.get("outside", "deny"))
        self.attributes = _attributes(self.options.get("attributes", "off"))
        self.root = root
        self._interfaces: dict[str, _Interface] = {}
        self._definers: dict[str, frozenset[str]] | None = None

    @property
    def inert(self) -> bool:
        return not self.boundaries

    def visit_Import(self, node: ast.Import, context: Context) -> None:
        for alias in node.names:
            self._check_module(alias.name, node, context)

    def visit_ImportFrom(self, node: ast.ImportFrom, context: Context) -> None:
        target = context.absolute(node.level, node.module)
        boundary = None if target is None else self._foreign(target, context)
        if target is None or boundary is None:
            return
        if not self._published_module(target, boundary):
            self._report_module(target, boundary, node, context)
            return
        interface = self._interface(target, self.root or context.root)
        for alias in node.names:
            if alias.name == "*" or (target == boundary and alias.name == self.api):
                continue
            if interface.names is None:
                hidden = alias.name in interface.submodules
            else:
                hidden = alias.name not in interface.names
            if hidden:
                face = f"{target}'s __init__" if target == boundary else target
                self.report(
                    context,
                    node,
                    f"{target}.{alias.name} is not published by {target}; import what {face} "
                    "exports",
                )

    def visit_Attribute(self, node: ast.Attribute, context: Context) -> None:
        """``thing._name``: another module's private name, when ``attributes = "module"``."""
        if not self.attributes or not _private(node.attr) or not isinstance(node.ctx, ast.Load):
            return
        receiver = node.value
        if isinstance(receiver, ast.Name) and receiver.id in {"self", "cls"}:
            return
        if self._boundary(context.module) is None:
            return
        definers = self._defined_in(self.root or context.root).get(node.attr, frozenset())
        if not definers or context.module in definers:
            return
        where = ", ".join(sorted(definers))
        self.report(
            context,
            node,
            f"{ast.unparse(node)} reads {node.attr}, private to {where}; use what it publishes, "
            "or have it hand over what this module needs",
        )

    def _defined_in(self, root: Path | None) -> dict[str, frozenset[str]]:
        """Each private name defined in the boundaries' packages, with the modules defining it."""
        if self._definers is None:
            found: dict[str, set[str]] = {}
            for module, tree in _package_trees(root, self.boundaries):
                for name in _private_definitions(tree):
                    found.setdefault(name, set()).add(module)
            self._definers = {name: frozenset(modules) for name, modules in found.items()}
        return self._definers

    def visit_Call(self, node: ast.Call, context: Context) -> None:
        """``importlib.import_module("a.b")`` and ``__import__("a.b")`` with a literal absolute
        name are imports too."""
        func = node.func
        dynamic = (isinstance(func, ast.Name) and func.id in {"import_module", "__import__"}) or (
            isinstance(func, ast.Attribute)
            and func.attr == "import_module"
            and isinstance(func.value, ast.Name)
            and func.value.id == "importlib"
        )
        if not dynamic or not node.args:
            return
        first = node.args[0]
        if not isinstance(first, ast.Constant) or not isinstance(first.value, str):
            return
        if first.value and not first.value.startswith("."):  # relative needs package=: skipped
            self._check_module(first.value, node, context)

    def _check_module(self, target: str, node: ast.AST, context: Context) -> None:
        boundary = self._foreign(target, context)
        if boundary is not None and not self._published_module(target, boundary):
            self._report_module(target, boundary, node, context)

    def _foreign(self, target: str, context: Context) -> str | None:
        """The boundary ``target`` belongs to when it is not the importing module's own and the
        importing module is held to boundaries; None otherwise."""
        if not self.boundaries:
            return None
        boundary = self._boundary(target)
        own = self._boundary(context.module)
        if boundary is None or boundary == own or (own is None and self.outside_allowed):
            return None
        return boundary

    def _boundary(self, module: str) -> str | None:
        """The shortest leading part of ``module`` a boundary glob matches, or None."""
        parts = module.split(".")
        for end in range(1, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if any(fnmatch.fnmatchcase(prefix, glob) for glob in self.boundaries):
                return prefix
        return None

    def _published_module(self, target: str, boundary: str) -> bool:
        return target == boundary or (self.api is not None and target == f"{boundary}.{self.api}")

    def _report_module(self, target: str, boundary: str, node: ast.AST, context: Context) -> None:
        published = boundary if self.api is None else f"{boundary} or {boundary}.{self.api}"
        self.report(
            context,
            node,
            f"{target} is internal to {boundary}; import what {published} exports",
        )

    def _interface(self, module: str, root: Path | None) -> _Interface:
        if module not in self._interfaces:
            self._interfaces[module] = _read_interface(root, module)
        return self._interfaces[module]


def _package_trees(
    root: Path | None, boundaries: tuple[str, ...]
) -> Iterator[tuple[str, ast.Module]]:
    """The parsed modules of the top-level packages the boundary globs name, with their names."""
    if root is None:
        return
    packages = {glob.split(".")[0] for glob in boundaries}
    for package in sorted(p for p in packages if p.isidentifier()):
        for base in (root, root / "src"):
            top = base / package
            if not top.is_dir():
                continue
            for source in sorted(top.rglob("*.py")):
                parts = list(source.relative_to(base).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts.pop()
                try:
                    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
                except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
                    continue
                yield ".".join(parts), tree
            break


def _private_definitions(tree: ast.Module) -> set[str]:
    """Private names a module defines: functions, classes, methods, assigned names and
    attributes assigned through ``self``/``cls``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}:
                names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if _private(name)}


def _read_interface(root: Path | None, module: str) -> _Interface:
    """The names ``module`` publishes, read from ``<root>/<path>`` or ``<root>/src/<path>``."""
    if root is None:
        return _Interface(None, frozenset())
    relative = Path(*module.split("."))
    for base in (root, root / "src"):
        package = base / relative
        for source in (package / "__init__.py", package.with_suffix(".py")):
            if source.is_file():
                submodules = _submodules(package) if source.name == "__init__.py" else set()
                return _Interface(_exports(source), frozenset(submodules))
        if package.is_dir():  # a namespace package publishes nothing but its submodules
            return _Interface(None, frozenset(_submodules(package)))
    return _Interface(None, frozenset())


def _submodules(package: Path) -> set[str]:
    found = set()
    for entry in package.iterdir():
        if entry.suffix == ".py" and entry.stem != "__init__":
            found.add(entry.stem)
        elif entry.is_dir() and entry.name.isidentifier() and entry.name != "__pycache__":
            found.add(entry.name)
    return found


def _exports(source: Path) -> frozenset[str] | None:
    """Public names bound at the top of ``source`` plus those ``__all__`` lists; None when the
    file cannot be read or parsed, or a star import makes its names unknowable."""
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    bound: set[str] = set()
    listed: set[str] = set()
    for node in _top_level(tree.body):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            bound.add(node.name)
        elif isinstance(node, ast.Import):
            bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return None
            bound.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names = _assigned(target)
                bound.update(names)
                if "__all__" in names and node.value is not None:
                    listed.update(_strings(node.value))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value.func
            if (
                isinstance(call, ast.Attribute)
                and isinstance(call.value, ast.Name)
                and call.value.id == "__all__"
                and call.attr in {"append", "extend"}
            ):
                for argument in node.value.args:
                    listed.update(_strings(argument))
    return frozenset({name for name in bound if not _private(name)} | listed)


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements run at import time, including those under ``if``/``try``/``with``."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            yield from _top_level(node.body)
            for handler in node.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(node.orelse)
            yield from _top_level(node.finalbody)
        elif isinstance(node, ast.With):
            yield from _top_level(node.body)


def _assigned(target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple | ast.List):
        return set().union(*(_assigned(element) for element in target.elts))
    return set()


def _strings(value: ast.expr) -> set[str]:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return {value.value}
    if isinstance(value, ast.List | ast.Tuple):
        return {
            element.value
            for element in value.elts
            if isinstance(element, ast.Constant) and isinstance(element.value, str)
        }
    return set()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _globs(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(g, str) and g for g in value):
        raise ConfigurationError(
            f"{_WHERE}: boundaries must be a list of module globs, one boundary per module "
            'a glob matches, e.g. boundaries = ["app.modules.*"]'
        )
    return tuple(value)


def _api(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.isidentifier():
        raise ConfigurationError(
            f"{_WHERE}: api must be the name of the submodule each boundary publishes besides "
            'its __init__, e.g. api = "api"'
        )
    return value


def _attributes(value: Any) -> bool:
    if value not in ("off", "module"):
        raise ConfigurationError(
            f'{_WHERE}: attributes must be "off" or "module" (may a module read another '
            'module\'s private names through an object?), e.g. attributes = "module"'
        )
    return str(value) == "module"


def _outside(value: Any) -> bool:
    if value not in ("allow", "deny"):
        raise ConfigurationError(
            f'{_WHERE}: outside must be "allow" or "deny" (may modules outside every boundary '
            f'import their internals?), e.g. outside = "deny"'
        )
    return str(value) == "allow"
