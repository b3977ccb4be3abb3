"""ONC204 reserved names: enum members named GLOBAL or ALL only in the vocabulary file.

Every case is a small module written under ``tmp_path`` and linted at that path; the lines
marked ``# fires`` are exactly the lines that must fire.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from oncely.errors import ConfigurationError
from oncely.lint import LintConfig, lint_source, read_config
from oncely.lint.rules.onc204_reserved_names import ReservedNameOutsideVocabulary

FIXTURE = Path(__file__).parent / "fixtures" / "ONC204.py"
VOCABULARY = "src/app/vocabulary.py"
OPTIONS: dict[str, Any] = {"names": ["GLOBAL", "ALL"], "vocabulary": VOCABULARY}
REPORTS = "src/app/reports/scopes.py"


def _lint(root: Path, relative: str, source: str, options: dict[str, Any] = OPTIONS) -> list[int]:
    """The lines ONC204 fires on in ``source``, written to and linted at ``root/relative``."""
    config = LintConfig(root=root, options={"ONC204": options})
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    findings = lint_source(path, source, config, [ReservedNameOutsideVocabulary(options)])
    assert all(f.code == "ONC204" and f.path == relative for f in findings)
    return [f.line for f in findings]


def _source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _marked(source: str) -> list[int]:
    lines = source.splitlines()
    return [n for n, line in enumerate(lines, 1) if line.rstrip().endswith("# fires")]


def test_the_violating_example_fires_and_the_clean_one_does_not(tmp_path: Path) -> None:
    rule = ReservedNameOutsideVocabulary
    options = dict(rule.example_options)
    assert _lint(tmp_path, REPORTS, rule.violating, options) == [5]
    assert _lint(tmp_path, REPORTS, rule.clean, options) == []


def test_inert_without_names(tmp_path: Path) -> None:
    violating = ReservedNameOutsideVocabulary.violating
    assert _lint(tmp_path, REPORTS, violating, {}) == []
    assert _lint(tmp_path, REPORTS, violating, {"names": [], "vocabulary": VOCABULARY}) == []


def test_the_fixture_fires_on_exactly_its_marked_lines(tmp_path: Path) -> None:
    source = FIXTURE.read_text()
    options = dict(ReservedNameOutsideVocabulary.example_options)
    assert _lint(tmp_path, "tests/lint/fixtures/ONC204.py", source, options) == _marked(source)


DISGUISES = {
    "enum imported under another name": """
        from enum import Enum as E


        class Scope(E):
            GLOBAL = "global"  # fires
        """,
    "the enum module aliased": """
        import enum as en


        class Audience(en.IntEnum):
            ALL = 0  # fires
            STAFF = 1
        """,
    "str mixin first, annotated member": """
        from enum import StrEnum


        class Scope(str, StrEnum):
            GLOBAL: str = "global"  # fires
        """,
    "a Flag combining others": """
        from enum import Flag, auto


        class Permission(Flag):
            READ = auto()
            WRITE = auto()
            ALL = READ | WRITE  # fires
        """,
    "tuple unpacking and chained assignment": """
        import enum


        class Scope(enum.IntEnum):
            GLOBAL, LOCAL = range(2)  # fires
            EVERYWHERE = ALL = 9  # fires
        """,
    "member under an if in the class body": """
        import enum
        import sys


        class Scope(enum.Enum):
            LOCAL = "local"
            if sys.version_info >= (3, 11):
                GLOBAL = "global"  # fires
        """,
    "through an enum base of the same file": """
        from enum import Enum

        Base = Enum


        class _ScopeBase(str, Base):
            def describe(self) -> str:
                return self.value


        class Scope(_ScopeBase):
            GLOBAL = "global"  # fires
        """,
    "a Django TextChoices": """
        from django.db import models


        class Scope(models.TextChoices):
            GLOBAL = "global", "Everywhere"  # fires
            TEAM = "team", "One team"
        """,
    "an enum in a function": """
        import enum


        def scopes():
            class Scope(enum.Enum):
                ALL = "all"  # fires

            return Scope
        """,
    "functional API with a list": """
        from enum import Enum

        Scope = Enum("Scope", ["LOCAL", "GLOBAL"])  # fires
        """,
    "functional API with a spaced and a comma string": """
        import enum

        Scope = enum.Enum("Scope", "GLOBAL LOCAL")  # fires
        Audience = enum.IntEnum("Audience", "STAFF,ALL")  # fires
        """,
    "functional API with pairs, a dict and names=": """
        import enum

        Scope = enum.Enum("Scope", [("GLOBAL", 1), ("LOCAL", 2)])  # fires
        Audience = enum.Enum("Audience", {"ALL": 0})  # fires
        Region = enum.StrEnum(value="Region", names=("EU", "GLOBAL"))  # fires
        """,
    "member() wrapper and a star import": """
        from enum import *


        class Scope(Enum):
            GLOBAL = member("global")  # fires
        """,
}


@pytest.mark.parametrize("source", DISGUISES.values(), ids=DISGUISES.keys())
def test_disguised_members_fire(tmp_path: Path, source: str) -> None:
    source = _source(source)
    assert _marked(source)
    assert _lint(tmp_path, REPORTS, source) == _marked(source)


LOOK_ALIKES = {
    "the vocabulary file itself": (
        VOCABULARY,
        """
        import enum


        class Scope(enum.Enum):
            GLOBAL = "global"
            ALL = "all"
        """,
    ),
    "a module constant": (
        REPORTS,
        """
        GLOBAL = "global"
        ALL: tuple[str, ...] = ("a", "b")
        """,
    ),
    "attributes of plain classes and dataclasses": (
        REPORTS,
        """
        from dataclasses import dataclass


        class Defaults:
            GLOBAL = True


        @dataclass
        class Filter:
            ALL: bool = False
        """,
    ),
    "a home-made class named Enum": (
        REPORTS,
        """
        class Enum:
            pass


        class Scope(Enum):
            GLOBAL = 1
        """,
    ),
    "using the vocabulary's members": (
        REPORTS,
        """
        from app.vocabulary import Scope

        everywhere = Scope.GLOBAL
        by_name = Scope["GLOBAL"]
        by_value = Scope("GLOBAL")
        """,
    ),
    "other names and a reserved value": (
        REPORTS,
        """
        import enum


        class Scope(enum.Enum):
            Global = 1
            GLOBAL_SCOPE = 2
            EVERYWHERE = "GLOBAL"
            ALL_TEAMS = "ALL"
        """,
    ),
    "locals of methods and a nested class": (
        REPORTS,
        """
        import enum


        class Scope(enum.Enum):
            TEAM = "team"

            def widened(self):
                GLOBAL = "global"
                return GLOBAL

            class Meta:
                ALL = True
        """,
    ),
    "_ignore_, nonmember and a bare annotation": (
        REPORTS,
        """
        import enum


        class Scope(enum.Enum):
            _ignore_ = ["GLOBAL"]
            GLOBAL = "global"
            ALL = enum.nonmember(("a", "b"))
            LOCAL = "local"


        class Audience(enum.Enum):
            _ignore_ = "scratch GLOBAL"
            GLOBAL = 0
            ALL: int
            STAFF = 1
        """,
    ),
    "Literal types and a dict": (
        REPORTS,
        """
        from typing import Literal

        ScopeName = Literal["GLOBAL", "LOCAL"]
        labels = dict(GLOBAL="Everywhere")
        """,
    ),
}


@pytest.mark.parametrize(("relative", "source"), LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
def test_look_alikes_do_not_fire(tmp_path: Path, relative: str, source: str) -> None:
    assert _lint(tmp_path, relative, _source(source)) == []


def test_the_finding_names_the_member_its_enum_and_the_vocabulary(tmp_path: Path) -> None:
    config = LintConfig(root=tmp_path, options={"ONC204": OPTIONS})
    source = _source(DISGUISES["functional API with a list"])
    rules = [ReservedNameOutsideVocabulary(OPTIONS)]
    (finding,) = lint_source(tmp_path / REPORTS, source, config, rules)
    assert str(finding) == (
        f"{REPORTS}:3:33: ONC204 reserved name outside the vocabulary: enum member GLOBAL of "
        "Scope; declare it only in src/app/vocabulary.py and import it from there"
    )


def test_options_read_from_pyproject_configure_the_rule(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.oncely.lint.ONC204]\nnames = ["GLOBAL"]\nvocabulary = "./src/app/vocabulary.py"\n'
    )
    options = read_config(tmp_path / "pyproject.toml").options["ONC204"]
    source = ReservedNameOutsideVocabulary.violating
    assert _lint(tmp_path, REPORTS, source, options) == [5]
    assert _lint(tmp_path, VOCABULARY, source, options) == []


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({**OPTIONS, "name": ["GLOBAL"]}, "unknown option 'name'; the options are names, vocab"),
        ({**OPTIONS, "names": "GLOBAL"}, "names must be a list of enum member names, e.g. names"),
        ({**OPTIONS, "names": ["GLOBAL SCOPE"]}, "names must be a list of enum member names"),
        ({"names": ["GLOBAL"]}, 'relative to pyproject.toml, e.g. vocabulary = "src/app/vocab'),
        ({**OPTIONS, "vocabulary": ["a.py"]}, "vocabulary must be the path of the one file"),
    ],
)
def test_bad_options_name_the_key_and_the_fix(options: dict[str, Any], names: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        ReservedNameOutsideVocabulary(options)
    assert str(raised.value).startswith("[tool.oncely.lint.ONC204]")
    assert names in str(raised.value)
