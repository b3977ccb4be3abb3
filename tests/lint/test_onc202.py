"""ONC202: a confined symbol imported, called or subclassed outside its modules."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from oncely.errors import ConfigurationError
from oncely.lint import LintConfig, lint_files, lint_source
from oncely.lint.rules.onc202_only_in import OnlyIn

FIXTURE = Path(__file__).parent / "fixtures" / "ONC202.py"
OPTIONS: dict[str, Any] = {"symbols": {"app.events.Engine": ["app.events.*", "app.wiring"]}}
JOBS = "app/billing/jobs.py"


def _lint(
    root: Path, source: str, where: str = JOBS, options: dict[str, Any] | None = None
) -> list[tuple[int, str]]:
    rule = OnlyIn(OPTIONS if options is None else options)
    findings = lint_source(root / where, textwrap.dedent(source), LintConfig(root=root), [rule])
    return [(f.line, f.message) for f in findings]


def test_the_violating_example_fires_and_the_clean_one_does_not(tmp_path: Path) -> None:
    options = dict(OnlyIn.example_options)
    fires = _lint(tmp_path, OnlyIn.violating, options=options)
    marked = [n for n, ln in enumerate(OnlyIn.violating.splitlines(), 1) if ln.endswith("# fires")]
    assert [line for line, _ in fires] == marked
    assert _lint(tmp_path, OnlyIn.clean, options=options) == []


@pytest.mark.parametrize(
    ("source", "line", "how"),
    [
        ("from app.events import Engine\nEngine()", 1, "imported"),
        ("from app.events import Engine as E\nE(workers=2)", 1, "imported"),
        ("from app.events import publish, Engine\npublish(Engine)", 1, "imported"),
        ("def make():\n    from app.events import Engine\n    return Engine()", 2, "imported"),
        ("from ..events import Engine", 1, "imported"),
        ("import app.events as ev\nev.Engine()", 2, "called"),
        ("import app.events\n\napp.events.Engine()", 3, "called"),
        ("from app import events\nevents.Engine()", 2, "called"),
        ("from .. import events\nengine = events.Engine()", 2, "called"),
        ("import app.events as ev\nMake = ev.Engine\nMake()", 3, "called"),
        ("import app.events as ev\nA = ev.Engine\nB: type = A\nB()", 4, "called"),
        ("import app.events as ev\nclass Mine(ev.Engine): ...", 2, "subclassed"),
        ('import app.events as ev\nev.Engine.from_url("sqlite://")', 2, "called"),
        ("from app.events import *\n\nEngine()", 3, "called"),
        ('import app.events as ev\ngetattr(ev, "Engine")()', 2, "called"),
        ('import importlib\nimportlib.import_module("app.events").Engine()', 2, "called"),
        (
            "from importlib import import_module as load\n"
            'events = load("app.events")\nevents.Engine()',
            3,
            "called",
        ),
        ("def later():\n    return ev.Engine(workers=2)\nimport app.events as ev", 2, "called"),
        ("import app.events as ev\ntasks.add(ev.Engine, workers=2)", 2, "passed"),
        ("import app.events as ev\nThread(target=ev.Engine).start()", 2, "passed"),
        (
            "import app.events as ev\ndef start(tasks, fast):\n    if fast:\n"
            "        make = ev.Engine\n    tasks.add(make, workers=2)",
            5,
            "passed",
        ),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\n"
            "else:\n    from app.events import Engine",
            5,
            "imported",
        ),
    ],
)
def test_uses_in_disguise_fire(tmp_path: Path, source: str, line: int, how: str) -> None:
    assert _lint(tmp_path, source) == [
        (
            line,
            f"confined symbol used outside its modules: app.events.Engine {how} here; "
            "it may be used only in app.events.*, app.wiring",
        )
    ]


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("from app.events import Engine\nEngine()", "app/events/bus.py"),
        ("from . import Engine\nEngine()", "app/events/testing/__init__.py"),
        ("import app.events as ev\nENGINE = ev.Engine()", "app/wiring.py"),
        ("class Engine: ...\nENGINE = Engine()", "app/events/__init__.py"),
        ("from app.events import Engine\nEngine()", "src/app/events/bus.py"),
        ("import app.events as ev\ndef run(engine: ev.Engine) -> ev.Engine: ...", JOBS),
        ("import app.events as ev\ndef check(x):\n    return isinstance(x, ev.Engine)", JOBS),
        ("import app.events as ev\nassert issubclass(Mine, (ev.Engine, Base))", JOBS),
        ("import typing\nimport app.events as ev\nengine = typing.cast(ev.Engine, make())", JOBS),
        ("import app.events as ev\nlog(ev.engine, ev.Engine.__name__)", JOBS),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from app.events import Engine\ndef run(engine: 'Engine') -> None: ...",
            JOBS,
        ),
        ("from app.other import Engine\nEngine()", JOBS),
        ("class Engine: ...\nEngine()", JOBS),
        ("from app.events import EngineConfig\nEngineConfig()", JOBS),
        ("import app.events_legacy as ev\nev.Engine()", JOBS),
        ("import app.events as ev\nev.publish('x')\nev.engine.run()", JOBS),
        ("def f(obj):\n    return obj.Engine()", JOBS),
        ('LOG = "app.events.Engine() is built in app.wiring"', JOBS),
        ("from app.events import *\nEngineConfig()\npublish()", JOBS),
        ("import app.events.bus as bus\nbus.Engine()", JOBS),
    ],
)
def test_look_alikes_do_not_fire(tmp_path: Path, source: str, where: str) -> None:
    assert _lint(tmp_path, source, where) == []


def test_an_empty_list_confines_a_symbol_to_the_module_defining_it(tmp_path: Path) -> None:
    options = {"symbols": {"app.db.pool.Pool": []}}
    source = "from app.db.pool import Pool\nPool()\n"
    assert _lint(tmp_path, "Pool()\n", "app/db/pool.py", options) == []
    assert _lint(tmp_path, "import app.db.pool as me\nme.Pool()\n", "app/db/pool.py", options) == []
    assert _lint(tmp_path, source, "app/db/session.py", options) == [
        (
            1,
            "confined symbol used outside its modules: app.db.pool.Pool imported here; "
            "it may be used only in app.db.pool, where it is defined",
        )
    ]


def test_each_confined_symbol_is_judged_on_its_own(tmp_path: Path) -> None:
    options = {"symbols": {"app.events.Engine": ["app.events.*"], "app.db.Pool": ["app.db.*"]}}
    source = "import app.db as db\nfrom app.events import Engine\ndb.Pool()\nEngine()\n"
    assert [line for line, _ in _lint(tmp_path, source, options=options)] == [2, 3]
    assert [line for line, _ in _lint(tmp_path, source, "app/db/x.py", options)] == [2]


def test_it_is_inert_without_symbols(tmp_path: Path) -> None:
    assert _lint(tmp_path, "from app.events import Engine\nEngine()\n", options={}) == []


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"symbol": {}}, "unknown key 'symbol'; the key is symbols"),
        ({"symbols": ["app.events.Engine"]}, "symbols must be a table of"),
        ({"symbols": {"Engine": ["app.*"]}}, "symbols key 'Engine' must be a dotted path"),
        ({"symbols": {"app.events.Engine": "app.*"}}, "symbols.app.events.Engine must be a list"),
    ],
)
def test_bad_options_name_the_key_and_the_fix(options: dict[str, Any], names: str) -> None:
    with pytest.raises(ConfigurationError, match=names) as raised:
        OnlyIn(options)
    if "unknown key" not in names:
        assert str(raised.value).endswith(
            'e.g. symbols = { "app.events.Engine" = ["app.events.*"] }'
        )


def test_the_fixture_fires_exactly_on_its_marked_lines() -> None:
    text = FIXTURE.read_text()
    marked = [n for n, line in enumerate(text.splitlines(), 1) if line.endswith("# fires")]
    config = LintConfig(root=FIXTURE.parent)
    findings = lint_source(FIXTURE, text, config, [OnlyIn(OPTIONS)])
    assert len(marked) >= 8
    assert sorted({f.line for f in findings}) == marked
    assert len(findings) == len(marked)


def test_lint_files_passes_the_configured_options(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text("from app.events import Engine\n")
    config = LintConfig(root=tmp_path, options={"ONC202": OPTIONS})
    assert [f.code for f in lint_files([tmp_path], config)] == ["ONC202"]
