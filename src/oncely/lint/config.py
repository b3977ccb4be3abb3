"""`[tool.oncely.lint]` in pyproject.toml: which rules run, and where a rule's pattern is allowed.

    [tool.oncely.lint]
    select = ["ONC"]                 # code prefixes; default: every rule
    ignore = ["ONC203"]
    exclude = ["migrations/*"]       # paths (globs, relative to pyproject.toml) not linted
    target-version = "py312"         # the oldest Python the code must parse under; default:
                                     # [project] requires-python's lower bound, else none
    docs-url = "https://docs.example.org/oncely/"   # where the docs site (docs/) is published:
                                     # findings link to <docs-url>lint/<CODE>/; default: none,
                                     # and findings name `oncely lint --explain CODE` instead

    [tool.oncely.lint.allow]         # the one place each pattern is allowed, configured
    ONC101 = ["src/oncely/worker/loop.py"]

    [tool.oncely.lint.ONC201]        # a rule's own options, checked by the rule
    boundaries = ["app.modules.*"]

A bad key or value raises `ConfigurationError` naming the key and the fix (exit status 2).
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oncely.errors import ConfigurationError
from oncely.lint.discovery import nearest_pyproject

_KEYS = {"select", "ignore", "exclude", "allow", "target-version", "docs-url"}
_RULE_TABLE = re.compile(r"ONC\d{3}")
_TARGET = re.compile(r"py3(?P<minor>\d{1,2})")
_REQUIRES = re.compile(r"^\s*>=?\s*3\.(?P<minor>\d{1,2})(?:\.\d+)?\s*(?:,|$)")


@dataclass(frozen=True)
class LintConfig:
    root: Path
    select: tuple[str, ...] = ("ONC",)
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    allow: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Per-rule option tables, ``[tool.oncely.lint.ONC201]``; each rule checks its own.
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The oldest Python the code must parse under, ``(3, 12)``; None: not said. Syntax newer
    #: than it is a syntax error (ONC001); newer only than the running Python, a note.
    target_version: tuple[int, int] | None = None
    #: Where the documentation site is published (ends with "/"); None: nowhere known.
    docs_url: str | None = None

    def enabled(self, code: str) -> bool:
        chosen = any(code.startswith(prefix) for prefix in self.select)
        return chosen and not any(code.startswith(prefix) for prefix in self.ignore)

    def allowed(self, code: str, path: Path) -> bool:
        """Whether ``code``'s pattern is configured as allowed in ``path``."""
        return self.allows(code, self.relative(path))

    def allows(self, code: str, relative: str) -> bool:
        """`allowed`, for a path already made `relative`."""
        return _matches(relative, self.allow.get(code, ()))

    def excluded(self, path: Path) -> bool:
        return self.excludes(self.relative(path))

    def excludes(self, relative: str) -> bool:
        """`excluded`, for a path already made `relative`."""
        return _matches(relative, self.exclude)

    def relative(self, path: Path) -> str:
        resolved = path.resolve()
        try:
            return resolved.relative_to(self.root).as_posix()
        except ValueError:
            return resolved.as_posix()


def _matches(relative: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(relative, pattern) for pattern in patterns)


def load_config(start: Path) -> LintConfig:
    """The configuration of the nearest pyproject.toml at or above ``start`` (defaults if none)."""
    found = nearest_pyproject(str(start))
    return read_config(Path(found)) if found else LintConfig(root=Path.cwd().resolve())


def read_config(pyproject: Path) -> LintConfig:
    try:
        document = tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"{pyproject}: cannot read it as TOML: {exc}") from exc
    table: Any = document.get("tool", {}).get("oncely", {}).get("lint", {})
    where = f"{pyproject} [tool.oncely.lint]"
    if not isinstance(table, dict):
        raise ConfigurationError(f"{where} must be a table")
    unknown = sorted(k for k in set(table) - _KEYS if not _RULE_TABLE.fullmatch(k))
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(sorted(_KEYS))}"
        )
    allow = table.get("allow", {})
    if not isinstance(allow, dict):
        raise ConfigurationError(f"{where}.allow must be a table of CODE = [path globs]")
    return LintConfig(
        root=pyproject.parent.resolve(),
        select=_strings(table, "select", where) or ("ONC",),
        ignore=_strings(table, "ignore", where),
        exclude=_strings(table, "exclude", where),
        allow={code: _strings(allow, code, f"{where}.allow") for code in allow},
        options=_options(table, where),
        target_version=_target_version(table, document, where),
        docs_url=_docs_url(table, where),
    )


def _docs_url(table: dict[str, Any], where: str) -> str | None:
    value = table.get("docs-url")
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise ConfigurationError(
            f"{where}.docs-url = {value!r}: give the http(s) address the docs site is "
            'published at, e.g. "https://docs.example.org/oncely/"'
        )
    return value if value.endswith("/") else value + "/"


def _target_version(
    table: dict[str, Any], document: dict[str, Any], where: str
) -> tuple[int, int] | None:
    """``target-version = "py312"``; else the lower bound of ``[project] requires-python``
    when it is a plain ``>=3.N``; else None."""
    value = table.get("target-version")
    if value is None:
        requires = document.get("project", {}).get("requires-python")
        found = _REQUIRES.match(requires) if isinstance(requires, str) else None
        return (3, int(found["minor"])) if found else None
    found = _TARGET.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise ConfigurationError(
            f'{where}: target-version must name a Python 3 release, e.g. target-version = "py312"'
        )
    return (3, int(found["minor"]))


def _options(table: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    options: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        if not _RULE_TABLE.fullmatch(key):
            continue
        if not isinstance(value, dict):
            raise ConfigurationError(f"{where}.{key} must be a table of that rule's options")
        options[key] = value
    return options


def _strings(table: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigurationError(
            f'{where}: {key} must be a list of strings, e.g. {key} = ["ONC101"]'
        )
    return tuple(value)
