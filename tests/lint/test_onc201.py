"""ONC201: imports of another boundary's internals, against small fake packages on disk."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from oncely.errors import ConfigurationError
from oncely.lint import LintConfig, lint_files, lint_source, python_files
from oncely.lint.rules.onc201_private_import_across_boundary import PrivateImportAcrossBoundary

FIXTURE = Path(__file__).parent / "fixtures" / "ONC201"
OPTIONS: dict[str, Any] = {"boundaries": ["app.modules.*"], "api": "api"}
ORDERS = "src/app/modules/orders/views.py"

# billing publishes Invoice (imported), refunds (a submodule it imports), charge and VERSION
# (defined), _audit (private but in __all__), and its api module; shipping is a namespace package.
TREE = {
    "src/app/__init__.py": "",
    "src/app/modules/__init__.py": "",
    "src/app/modules/billing/__init__.py": """
        from app.modules.billing.models import Invoice
        from . import refunds

        __all__ = ["Invoice", "refunds", "_audit"]
        __version__ = "1"
        VERSION = 1

        def charge(): ...
        def _audit(): ...
        def _internal_helper(): ...
    """,
    "src/app/modules/billing/models.py": "class Invoice: ...\nclass Secret: ...\n",
    "src/app/modules/billing/refunds.py": "",
    "src/app/modules/billing/_ledger.py": "def _post(): ...\n",
    "src/app/modules/billing/api.py": "def pay(): ...\ndef _secret(): ...\n",
    "src/app/modules/billing/tasks/__init__.py": "def nightly(): ...\n",
    "src/app/modules/shipping/rates.py": "RATE = 1\n",
    "src/app/modules/orders/__init__.py": "",
}


def _tree(root: Path) -> Path:
    for name, text in TREE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _lint(
    root: Path, source: str, where: str = ORDERS, options: dict[str, Any] | None = None
) -> list[tuple[int, str]]:
    rule = PrivateImportAcrossBoundary(OPTIONS if options is None else options, root=root)
    findings = lint_source(root / where, textwrap.dedent(source), LintConfig(root=root), [rule])
    return [(f.line, f.message) for f in findings]


def test_the_violating_example_fires_and_the_clean_one_does_not(tmp_path: Path) -> None:
    options = dict(PrivateImportAcrossBoundary.example_options)
    fires = _lint(tmp_path, PrivateImportAcrossBoundary.violating, "app/main.py", options)
    marked = [
        n
        for n, line in enumerate(PrivateImportAcrossBoundary.violating.splitlines(), 1)
        if line.endswith("# fires")
    ]
    assert [line for line, _ in fires] == marked
    assert _lint(tmp_path, PrivateImportAcrossBoundary.clean, "app/main.py", options) == []


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("import app.modules.billing.models", ORDERS),
        ("from app.modules.billing.models import Invoice", ORDERS),
        ("from app.modules.billing import models", ORDERS),
        ("import app.modules.billing.models as billing_models", ORDERS),
        ("from ..billing.models import Invoice", ORDERS),
        ("from ..billing import models", ORDERS),
        ("from .billing.models import Invoice", "src/app/modules/__init__.py"),
        (
            "def total():\n    from app.modules.billing.models import Invoice\n    return Invoice",
            ORDERS,
        ),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from app.modules.billing.models import Invoice",
            ORDERS,
        ),
        (
            "try:\n    from app.modules.billing.models import Invoice\n"
            "except ImportError:\n    Invoice = None",
            ORDERS,
        ),
        ('import importlib\nimportlib.import_module("app.modules.billing.models")', ORDERS),
        ('__import__("app.modules.billing._ledger")', ORDERS),
        ("from app.modules.billing import Secret", ORDERS),
        ("from app.modules.billing import _internal_helper", ORDERS),
        ("from app.modules.billing import Invoice, models", ORDERS),
        ("from app.modules.billing.tasks import nightly", ORDERS),
        ("from app.modules.billing.api import _secret", ORDERS),
        ("import os, app.modules.billing.models", ORDERS),
        ("from app.modules.shipping import rates", ORDERS),
        ("from app.modules.billing.models import Invoice", "src/app/main.py"),
        ("from app.modules.billing.models import Invoice", "tests/test_billing.py"),
    ],
)
def test_private_imports_in_disguise_fire(tmp_path: Path, source: str, where: str) -> None:
    findings = _lint(_tree(tmp_path), source, where)
    assert len(findings) == 1, findings
    assert findings[0][1].startswith("private import across a boundary: app.modules.")


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("from app.modules.billing import Invoice", ORDERS),
        ("from app.modules.billing import charge, VERSION, __version__", ORDERS),
        ("from app.modules.billing import refunds", ORDERS),
        ("from app.modules.billing import _audit", ORDERS),
        ("from app.modules.billing.api import pay", ORDERS),
        ("from app.modules.billing import api\nimport app.modules.billing.api", ORDERS),
        ("import app.modules.billing\napp.modules.billing.Invoice()", ORDERS),
        ("from app.modules.billing import *", ORDERS),
        ("from app.modules import billing\nbilling.charge()", ORDERS),
        ("from .models import Secret\nfrom ._ledger import _post", "src/app/modules/billing/x.py"),
        ("from app.modules.billing._ledger import _post", "src/app/modules/billing/api.py"),
        ("from ..models import Secret", "src/app/modules/billing/tasks/nightly.py"),
        ("import app.modules.billing._ledger", "src/app/modules/billing/tasks/__init__.py"),
        ("from app.modules_legacy.billing.models import Invoice", ORDERS),
        ("from billing.models import Invoice\nimport app.modules", ORDERS),
        (
            'NAME = "app.modules.billing.models"\nimport importlib\nimportlib.import_module(NAME)',
            ORDERS,
        ),
        ("from app.modules.payments import Gateway", ORDERS),
    ],
)
def test_look_alikes_do_not_fire(tmp_path: Path, source: str, where: str) -> None:
    assert _lint(_tree(tmp_path), source, where) == []


def test_outside_allow_lets_modules_outside_every_boundary_reach_in(tmp_path: Path) -> None:
    source = "from app.modules.billing.models import Invoice"
    allowed = {**OPTIONS, "outside": "allow"}
    assert _lint(_tree(tmp_path), source, "src/app/main.py", allowed) == []
    assert len(_lint(tmp_path, source, ORDERS, allowed)) == 1


def test_the_interface_is_read_from_the_root_without_src_too(tmp_path: Path) -> None:
    (tmp_path / "app/modules/billing").mkdir(parents=True)
    (tmp_path / "app/modules/billing/__init__.py").write_text("from .models import Invoice\n")
    where = "app/modules/orders/views.py"
    assert _lint(tmp_path, "from app.modules.billing import Invoice", where) == []
    assert len(_lint(tmp_path, "from app.modules.billing import Secret", where)) == 1


def test_without_a_readable_init_only_submodule_imports_are_findings(tmp_path: Path) -> None:
    source = "from app.modules.billing import Secret\nfrom app.modules.billing.models import X\n"
    rule = PrivateImportAcrossBoundary(OPTIONS)  # no root: nothing is read from disk
    findings = lint_source(tmp_path / ORDERS, source, LintConfig(root=tmp_path), [rule])
    assert [f.line for f in findings] == [2]
    broken = {**TREE, "src/app/modules/billing/__init__.py": "def broken(:\n"}
    for name, text in broken.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert [line for line, _ in _lint(tmp_path, source)] == [2]


def test_the_message_names_the_module_the_boundary_and_what_to_import(tmp_path: Path) -> None:
    [(_, message)] = _lint(_tree(tmp_path), "from app.modules.billing.models import Invoice")
    assert message == (
        "private import across a boundary: app.modules.billing.models is internal to "
        "app.modules.billing; import what app.modules.billing or app.modules.billing.api exports"
    )
    [(_, message)] = _lint(tmp_path, "from app.modules.billing import Secret")
    assert message.endswith(
        "app.modules.billing.Secret is not published by app.modules.billing; "
        "import what app.modules.billing's __init__ exports"
    )


def test_it_is_inert_without_boundaries(tmp_path: Path) -> None:
    source = "import app.modules.billing.models\n"
    assert _lint(_tree(tmp_path), source, options={}) == []
    assert _lint(tmp_path, source, options={"api": "api", "outside": "deny"}) == []


@pytest.mark.parametrize(
    ("options", "names"),
    [
        (
            {"boundary": ["app.*"]},
            "unknown key 'boundary'; the keys are api, attributes, boundaries, outside",
        ),
        ({"boundaries": "app.modules.*"}, 'e.g. boundaries = \\["app.modules.\\*"\\]'),
        ({"boundaries": ["app.*", 3]}, "boundaries must be a list of module globs"),
        ({"boundaries": ["app.*"], "api": "api.v1"}, 'api must be the name of .* api = "api"'),
        ({"boundaries": ["app.*"], "outside": "warn"}, 'outside must be "allow" or "deny"'),
    ],
)
def test_bad_options_name_the_key_and_the_fix(options: dict[str, Any], names: str) -> None:
    with pytest.raises(ConfigurationError, match=names):
        PrivateImportAcrossBoundary(options)


def test_the_fixture_tree_fires_exactly_on_its_marked_lines() -> None:
    config = LintConfig(root=FIXTURE)
    rule = PrivateImportAcrossBoundary(OPTIONS, root=FIXTURE)
    found, marked = set(), set()
    for path in python_files([FIXTURE], config):
        text = path.read_text()
        found |= {(f.path, f.line) for f in lint_source(path, text, config, [rule])}
        shown = config.relative(path)
        marked |= {
            (shown, n) for n, ln in enumerate(text.splitlines(), 1) if ln.endswith("# fires")
        }
    assert len(marked) >= 8
    assert found == marked


def test_lint_files_passes_the_configured_options(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app/main.py").write_text("import app.modules.billing.models\n")
    config = LintConfig(root=tmp_path, options={"ONC201": OPTIONS})
    assert [f.code for f in lint_files([tmp_path], config)] == ["ONC201"]


ATTRIBUTE_TREE = {
    "src/app/__init__.py": "",
    "src/app/core.py": """
        class App:
            def __init__(self):
                self._engine = object()
            def _sync(self): ...
            def same(self, other):
                return other._engine  # the module that defines it
    """,
    "src/app/worker/__init__.py": "",
    "src/app/worker/loop.py": """
        class Worker:
            def __init__(self, app):
                self.app = app
                self._own = 1
    """,
}
ATTRIBUTES: dict[str, Any] = {"boundaries": ["app.*"], "attributes": "module"}


@pytest.mark.parametrize(
    "source",
    [
        "def run(app):\n    return app._engine",
        "class W:\n    def go(self):\n        self.app._sync()",
        "def run(app):\n    return getattr(app, 'x') or app.core._engine",
    ],
)
def test_another_modules_private_names_read_through_an_object_fire(
    tmp_path: Path, source: str
) -> None:
    root = tmp_path
    for name, text in ATTRIBUTE_TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    findings = _lint(root, source, "src/app/worker/loop.py", ATTRIBUTES)
    assert len(findings) == 1, findings
    assert "private to app.core; use what it publishes" in findings[0][1]


@pytest.mark.parametrize(
    ("source", "where", "options"),
    [
        ("def f(w):\n    return w._own", "src/app/worker/loop.py", ATTRIBUTES),
        (
            "class W:\n    def f(self):\n        return self._engine",
            "src/app/worker/loop.py",
            ATTRIBUTES,
        ),
        ("import os\nos._exit(0)", "src/app/worker/loop.py", ATTRIBUTES),
        ("def f(t):\n    return t._asdict()", "src/app/worker/loop.py", ATTRIBUTES),
        ("def f(app):\n    return app._engine", "src/app/core.py", ATTRIBUTES),
        ("def f(app):\n    return app._engine", "tests/test_core.py", ATTRIBUTES),
        (
            "def f(app):\n    return app._engine",
            "src/app/worker/loop.py",
            {"boundaries": ["app.*"]},
        ),
    ],
)
def test_private_names_of_the_module_itself_or_of_no_module_here_do_not_fire(
    tmp_path: Path, source: str, where: str, options: dict[str, Any]
) -> None:
    root = tmp_path
    for name, text in ATTRIBUTE_TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    assert _lint(root, source, where, options) == []


def test_attributes_takes_off_or_module() -> None:
    with pytest.raises(ConfigurationError, match='attributes must be "off" or "module"'):
        PrivateImportAcrossBoundary({"boundaries": ["app.*"], "attributes": True})


def test_oncely_keeps_its_own_layering() -> None:
    """oncely's pyproject holds its packages to what each publishes (imports and private
    names); run on main before issue 22, it found 11 reaches, among them the worker's
    ``self.app._the_engine()``, ``self.app._sync_clock()`` and embedded.py's ``worker._engine``."""
    from oncely.lint import read_config

    root = Path(__file__).resolve().parents[2]
    configured = read_config(root / "pyproject.toml")
    assert configured.options["ONC201"]["attributes"] == "module"
    assert lint_files([root / "src"], configured, ["ONC201"]) == []
