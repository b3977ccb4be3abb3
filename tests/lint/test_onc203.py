"""ONC203 declare-only-in: a kind's declarations (a base class or a call) only in its files.

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
from oncely.lint.rules.onc203_declare_only_in import DeclarationOutsideItsFiles

FIXTURE = Path(__file__).parent / "fixtures" / "ONC203.py"
SETTINGS = {
    "name": "settings",
    "calls": ["environ.Env", "pydantic_settings.BaseSettings"],
    "bases": ["pydantic_settings.BaseSettings"],
    "files": ["*/settings.py"],
}
CHANNELS = {
    "name": "channels",
    "calls": ["app.bus.channel"],
    "bases": ["app.bus.Channel"],
    "files": ["src/app/channels.py"],
}
KINDS: dict[str, Any] = {"kinds": [SETTINGS, CHANNELS]}
VIEWS = "src/app/billing/views.py"


def _lint(root: Path, relative: str, source: str, options: dict[str, Any]) -> list[int]:
    """The lines ONC203 fires on in ``source``, written to and linted at ``root/relative``."""
    config = LintConfig(root=root, options={"ONC203": options})
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    findings = lint_source(path, source, config, [DeclarationOutsideItsFiles(options)])
    assert all(f.code == "ONC203" and f.path == relative for f in findings)
    return [f.line for f in findings]


def _marked(source: str) -> list[int]:
    return [n for n, line in enumerate(source.splitlines(), 1) if line.rstrip().endswith("# fires")]


def test_the_violating_example_fires_and_the_clean_one_does_not(tmp_path: Path) -> None:
    rule = DeclarationOutsideItsFiles
    options = dict(rule.example_options)
    assert _lint(tmp_path, VIEWS, rule.violating, options) == [4]
    assert _lint(tmp_path, VIEWS, rule.clean, options) == []


def test_inert_without_kinds(tmp_path: Path) -> None:
    violating = DeclarationOutsideItsFiles.violating
    assert _lint(tmp_path, VIEWS, violating, {}) == []
    assert _lint(tmp_path, VIEWS, violating, {"kinds": []}) == []


def test_the_fixture_fires_on_exactly_its_marked_lines(tmp_path: Path) -> None:
    source = FIXTURE.read_text()
    options = dict(DeclarationOutsideItsFiles.example_options)
    assert _lint(tmp_path, "tests/lint/fixtures/ONC203.py", source, options) == _marked(source)


DISGUISES = {
    "module alias": """
        import pydantic_settings as ps


        class Billing(ps.BaseSettings):  # fires
            stripe_key: str
        """,
    "from-import alias": """
        from pydantic_settings import BaseSettings as Base


        class Billing(Base):  # fires
            stripe_key: str
        """,
    "assigned alias": """
        import pydantic_settings

        Base = pydantic_settings.BaseSettings
        Config = Base


        class Billing(Config):  # fires
            stripe_key: str
        """,
    "through a class of the same file": """
        from pydantic_settings import BaseSettings


        class _Prefixed(BaseSettings):  # fires
            model_config = {"env_prefix": "APP_"}


        class Billing(_Prefixed):  # fires
            stripe_key: str
        """,
    "import and call inside a function": """
        def load_env():
            import environ

            return environ.Env(DEBUG=(bool, False))  # fires
        """,
    "fallback import under try": """
        try:
            from pydantic_settings import BaseSettings
        except ImportError:
            from pydantic import BaseSettings


        class Billing(BaseSettings, env_prefix="BILLING_"):  # fires
            stripe_key: str
        """,
    "class made with type()": """
        from pydantic_settings import BaseSettings

        Billing = type("Billing", (BaseSettings,), {"__annotations__": {"key": str}})  # fires
        """,
    "class made with create_model": """
        from pydantic import create_model
        from pydantic_settings import BaseSettings

        Billing = create_model("Billing", __base__=BaseSettings, key=(str, ...))  # fires
        """,
    "deferred with functools.partial": """
        import functools

        from environ import Env

        make_env = functools.partial(Env, DEBUG=(bool, False))  # fires
        """,
    "importlib.import_module": """
        import importlib

        env = importlib.import_module("environ").Env()  # fires
        """,
    "__import__ then an alias": """
        Env = __import__("environ").Env
        env = Env()  # fires
        """,
    "star import": """
        from pydantic_settings import *


        class Billing(BaseSettings):  # fires
            stripe_key: str
        """,
    "class in a function, after a mixin": """
        from pydantic_settings import BaseSettings


        class Mixin:
            pass


        def settings_for(tenant):
            class TenantSettings(Mixin, BaseSettings):  # fires
                tenant_id: str = tenant

            return TenantSettings()
        """,
    "instantiating the base directly": """
        from pydantic_settings import BaseSettings

        settings = BaseSettings(_env_file=".env")  # fires
        """,
    "relative import of a generic base": """
        from ..bus import Channel


        class Invoices(Channel[dict]):  # fires
            topic = "invoices"
        """,
    "dotted import": """
        import app.bus

        invoices = app.bus.channel("invoices")  # fires
        """,
}


@pytest.mark.parametrize("source", DISGUISES.values(), ids=DISGUISES.keys())
def test_disguised_declarations_fire(tmp_path: Path, source: str) -> None:
    source = textwrap.dedent(source)
    assert _marked(source)
    assert _lint(tmp_path, VIEWS, source, KINDS) == _marked(source)


DISGUISED_PLACES = {
    "another kind's declaration in a settings file": (
        "src/app/settings.py",
        """
        from app.bus import Channel


        class Invoices(Channel):  # fires
            topic = "invoices"
        """,
    ),
    "a file named like the settings file": (
        "src/app/settings_helpers.py",
        """
        import environ

        env = environ.Env()  # fires
        """,
    ),
    "a package's __init__ importing a sibling relatively": (
        "src/app/billing/__init__.py",
        """
        from .. import bus

        invoices = bus.channel("invoices")  # fires
        """,
    ),
}


@pytest.mark.parametrize(
    ("relative", "source"), DISGUISED_PLACES.values(), ids=DISGUISED_PLACES.keys()
)
def test_declarations_in_disguised_places_fire(tmp_path: Path, relative: str, source: str) -> None:
    source = textwrap.dedent(source)
    assert _lint(tmp_path, relative, source, KINDS) == _marked(source)


LOOK_ALIKES = {
    "the settings file itself": (
        "src/app/settings.py",
        """
        import environ
        from pydantic_settings import BaseSettings

        env = environ.Env()


        class Settings(BaseSettings):
            stripe_key: str
        """,
    ),
    "a nested settings file": (
        "src/app/billing/settings.py",
        """
        from pydantic_settings import BaseSettings


        class BillingSettings(BaseSettings):
            stripe_key: str
        """,
    ),
    "the channels file": (
        "src/app/channels.py",
        """
        from app.bus import Channel, channel


        class Invoices(Channel):
            topic = "invoices"


        refunds = channel("refunds")
        """,
    ),
    "a home-made class named BaseSettings": (
        VIEWS,
        """
        class BaseSettings:
            pass


        class Billing(BaseSettings):
            stripe_key = ""
        """,
    ),
    "another library's base and a look-alike name": (
        VIEWS,
        """
        import environs
        from pydantic import BaseModel

        from app.base import MyBaseSettings


        class Invoice(BaseModel):
            total: int


        class Billing(MyBaseSettings):
            pass


        env = environs.Env()
        """,
    ),
    "using the settings, not declaring them": (
        VIEWS,
        """
        from app.settings import Settings, settings

        key = settings.stripe_key
        fields = Settings.model_fields
        """,
    ),
    "isinstance, annotations and strings": (
        VIEWS,
        """
        import typing

        from pydantic_settings import BaseSettings


        def check(candidate: BaseSettings) -> bool:
            '''Is ``candidate`` a pydantic_settings.BaseSettings? environ.Env() is not.'''
            typing.cast("BaseSettings", candidate)
            return isinstance(candidate, BaseSettings) and issubclass(type(candidate), BaseSettings)
        """,
    ),
    "methods of the configured callable and os.environ": (
        VIEWS,
        """
        import os

        import environ

        environ.Env.read_env(".env")
        debug = os.environ.get("DEBUG")
        """,
    ),
    "a parameter shadowing the module's name": (
        VIEWS,
        """
        def build(environ):
            return environ.Env()
        """,
    ),
    "partial and type() of something else": (
        VIEWS,
        """
        import functools

        from pydantic import BaseModel

        shout = functools.partial(print, end="!")
        Invoice = type("Invoice", (BaseModel,), {})
        kind = type(shout)
        """,
    ),
}


@pytest.mark.parametrize(("relative", "source"), LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
def test_look_alikes_do_not_fire(tmp_path: Path, relative: str, source: str) -> None:
    assert _lint(tmp_path, relative, textwrap.dedent(source), KINDS) == []


def test_the_finding_names_the_kind_the_base_and_the_files(tmp_path: Path) -> None:
    config = LintConfig(root=tmp_path, options={"ONC203": KINDS})
    source = textwrap.dedent(DISGUISES["module alias"])
    (finding,) = lint_source(tmp_path / VIEWS, source, config, [DeclarationOutsideItsFiles(KINDS)])
    assert str(finding) == (
        f"{VIEWS}:5:1: ONC203 declaration outside the files kept for its kind: settings class "
        "Billing (from pydantic_settings.BaseSettings) belongs in */settings.py"
    )


def test_options_read_from_pyproject_configure_the_rule(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.oncely.lint.ONC203]\n"
        'kinds = [{ name = "settings", bases = ["pydantic_settings.BaseSettings"], '
        'files = ["*/settings.py"] }]\n'
    )
    options = read_config(tmp_path / "pyproject.toml").options["ONC203"]
    source = DeclarationOutsideItsFiles.violating
    assert _lint(tmp_path, VIEWS, source, options) == [4]
    assert _lint(tmp_path, "src/app/settings.py", source, options) == []


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"kind": []}, "unknown option 'kind'; the one option is kinds = ["),
        ({"kinds": {"name": "settings"}}, "kinds must be a list of tables, e.g."),
        ({"kinds": [{**SETTINGS, "base": []}]}, "kinds[0]: unknown key 'base'; the keys are"),
        ({"kinds": [{**SETTINGS, "name": ""}]}, 'name must name the kind, e.g. name = "settings"'),
        (
            {"kinds": [{**SETTINGS, "bases": "pydantic_settings.BaseSettings"}]},
            'bases must be a list of dotted names, module included, e.g. bases = ["',
        ),
        (
            {"kinds": [{**SETTINGS, "calls": ["Env"]}]},
            "calls must be a list of dotted names, module included",
        ),
        (
            {"kinds": [{**SETTINGS, "calls": [], "bases": []}]},
            "kinds[0] (settings): give calls, bases or both",
        ),
        (
            {"kinds": [{**SETTINGS, "files": []}]},
            "files must be a non-empty list of path globs relative to pyproject.toml, e.g. files",
        ),
        ({"kinds": [CHANNELS, CHANNELS]}, "two kinds are named 'channels'"),
    ],
)
def test_bad_options_name_the_key_and_the_fix(options: dict[str, Any], names: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        DeclarationOutsideItsFiles(options)
    assert str(raised.value).startswith("[tool.oncely.lint.ONC203]")
    assert names in str(raised.value)
