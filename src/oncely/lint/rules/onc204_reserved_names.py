"""ONC204: an enum member with a reserved name (GLOBAL, ALL) outside the one vocabulary file."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from oncely.errors import ConfigurationError
from oncely.lint.rules.base import Context, Rule
from oncely.lint.rules.onc203_declare_only_in import ImportedNames, imported_names

_WHERE = "[tool.oncely.lint.ONC204]"
_OPTIONS = ("names", "vocabulary")
#: Classes whose subclasses' attributes are enum members, and whose calls build an enum.
ENUM_BASES = frozenset(
    {
        *(f"enum.{name}" for name in ("Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "ReprEnum")),
        *(
            f"django.db.models{module}.{name}"
            for module in ("", ".enums")
            for name in ("Choices", "IntegerChoices", "TextChoices")
        ),
    }
)
_NONMEMBER = "enum.nonmember"
_NAME_SEPARATORS = re.compile(r"[\s,]+")


class ReservedNameOutsideVocabulary(Rule):
    """## What it does
    Finds enum members with a reserved name (``names``) anywhere but the one ``vocabulary``
    file: members of classes deriving from ``enum.Enum``, ``IntEnum``, ``StrEnum``, ``Flag``,
    ``IntFlag`` or Django's ``Choices``, through the file's imports and aliases and through its
    own enum classes, assigned (``GLOBAL = ...``, ``GLOBAL, LOCAL = ...``), annotated
    (``GLOBAL: int = ...``) or given to the functional API (``Enum("Scope", "GLOBAL LOCAL")``,
    a list, pairs or a dict). A module constant or a plain class attribute with that name is
    not a member; neither are names in ``_ignore_`` or wrapped in ``enum.nonmember``. Inert
    until names are configured:

    ```toml
    [tool.oncely.lint.ONC204]
    names = ["GLOBAL", "ALL"]
    vocabulary = "src/app/vocabulary.py"
    ```

    ## Why is this bad?
    A reserved name means one thing across the codebase: ``Scope.GLOBAL`` widens a query to
    every tenant. A second enum with its own ``GLOBAL`` looks the same at the call site and is
    compared, serialised and stored as if it were the same value, until a check written against
    one silently passes for the other.

    ## Example
    ```python
    import enum

    class ReportScope(enum.Enum):
        GLOBAL = "global"
        TEAM = "team"
    ```

    ## Use instead
    ```python
    import enum

    from app.vocabulary import Scope  # Scope.GLOBAL, declared once

    class ReportScope(enum.Enum):
        TEAM = "team"
    ```
    """

    code = "ONC204"
    name = "reserved-names"
    message = "reserved name outside the vocabulary"
    violating = 'import enum\n\n\nclass ReportScope(enum.Enum):\n    GLOBAL = "global"\n'
    clean = (
        "import enum\n"
        "\n"
        "from app.vocabulary import Scope\n"
        "\n"
        "\n"
        "class ReportScope(enum.Enum):\n"
        '    TEAM = "team"\n'
        "\n"
        "\n"
        "DEFAULT = Scope.GLOBAL\n"
    )
    example_options: ClassVar[Mapping[str, Any]] = {
        "names": ["GLOBAL", "ALL"],
        "vocabulary": "src/app/vocabulary.py",
    }

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        self._names, self._vocabulary = _checked(self.options)

    @property
    def inert(self) -> bool:
        return not self._names

    def visit_ClassDef(self, node: ast.ClassDef, context: Context) -> None:
        if not self._names or context.path == self._vocabulary:
            return
        names = imported_names(context)
        if names.derives_from(node, ENUM_BASES) is None:
            return
        ignored = _ignored(node.body)
        for member in _members(node.body, names):
            if member.id in self._names and member.id not in ignored:
                self._report(context, member, member.id, node.name)

    def visit_Call(self, node: ast.Call, context: Context) -> None:
        if not self._names or context.path == self._vocabulary:
            return
        names = imported_names(context)
        if not names.qualified(node.func) & ENUM_BASES:
            return
        listed = [keyword.value for keyword in node.keywords if keyword.arg == "names"]
        listed += node.args[1:2]
        enum_name = _string(node.args[0]) if node.args else None
        for spelled in listed:
            for where, member in _functional_members(spelled):
                if member in self._names:
                    self._report(context, where, member, enum_name or "an enum")

    def _report(self, context: Context, node: ast.AST, member: str, enum_name: str) -> None:
        self.report(
            context,
            node,
            f"enum member {member} of {enum_name}; declare it only in {self._vocabulary} "
            f"and import it from there",
        )


def _members(body: list[ast.stmt], names: ImportedNames) -> Iterator[ast.Name]:
    """The names an enum class body binds as members; nested functions and classes bind none."""
    for statement in body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(statement, ast.Assign) and not _nonmember(statement.value, names):
            for target in statement.targets:
                yield from _bound(target)
        elif (
            isinstance(statement, ast.AnnAssign)
            and statement.value is not None  # a bare annotation makes no member
            and not _nonmember(statement.value, names)
        ):
            yield from _bound(statement.target)
        for block in ("body", "orelse", "finalbody"):
            inner = getattr(statement, block, None)
            if isinstance(inner, list):
                yield from _members(inner, names)
        for clause in (*getattr(statement, "handlers", ()), *getattr(statement, "cases", ())):
            yield from _members(clause.body, names)


def _bound(target: ast.expr) -> Iterator[ast.Name]:
    if isinstance(target, ast.Name):
        yield target
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _bound(element)
    elif isinstance(target, ast.Starred):
        yield from _bound(target.value)


def _nonmember(value: ast.expr, names: ImportedNames) -> bool:
    return isinstance(value, ast.Call) and _NONMEMBER in names.qualified(value.func)


def _ignored(body: list[ast.stmt]) -> set[str]:
    """The names an enum's ``_ignore_`` (a string or a list of strings) keeps from membership."""
    ignored: set[str] = set()
    for statement in body:
        if not isinstance(statement, ast.Assign):
            continue
        if any(isinstance(t, ast.Name) and t.id == "_ignore_" for t in statement.targets):
            ignored.update(member for _, member in _functional_members(statement.value))
    return ignored


def _functional_members(spelled: ast.expr) -> Iterator[tuple[ast.AST, str]]:
    """The member names of the functional API's ``names`` argument, each with its node:
    ``"A B"``/``"A,B"``, ``["A", "B"]``, ``[("A", 1)]`` or ``{"A": 1}``."""
    text = _string(spelled)
    if text is not None:
        for member in _NAME_SEPARATORS.split(text.strip()):
            if member:
                yield spelled, member
    elif isinstance(spelled, ast.List | ast.Tuple | ast.Set):
        for element in spelled.elts:
            named = element
            if isinstance(element, ast.Tuple | ast.List) and element.elts:
                named = element.elts[0]
            member = _string(named)
            if member is not None:
                yield named, member
    elif isinstance(spelled, ast.Dict):
        for key in spelled.keys:
            member = _string(key) if key is not None else None
            if key is not None and member is not None:
                yield key, member


def _string(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _checked(options: Mapping[str, Any]) -> tuple[frozenset[str], str]:
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ConfigurationError(
            f"{_WHERE}: unknown option {unknown[0]!r}; the options are {', '.join(_OPTIONS)}"
        )
    names = options.get("names", [])
    if not isinstance(names, list) or not all(
        isinstance(name, str) and name.isidentifier() for name in names
    ):
        raise ConfigurationError(
            f'{_WHERE}: names must be a list of enum member names, e.g. names = ["GLOBAL", "ALL"]'
        )
    vocabulary = options.get("vocabulary", "")
    if not isinstance(vocabulary, str) or (names and not vocabulary.strip()):
        raise ConfigurationError(
            f"{_WHERE}: vocabulary must be the path of the one file the reserved names are "
            f'declared in, relative to pyproject.toml, e.g. vocabulary = "src/app/vocabulary.py"'
        )
    return frozenset(names), vocabulary.strip().removeprefix("./")
