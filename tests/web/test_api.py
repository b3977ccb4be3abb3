"""The /api twins say what the command line says: the same documents, from the same code."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _web_support import call
from click.testing import CliRunner

import oncely
from oncely.cli import main
from oncely.web import dashboard


@pytest.fixture
def served_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> Iterator[tuple[str, oncely.App]]:
    (tmp_path / "web_api_app.py").write_text(
        f"from _web_support import build\napp, clock = build({sqlite_url!r})\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("web_api_app")
    yield "web_api_app:app", module.app
    module.app.close()
    sys.modules.pop("web_api_app", None)


def cli_json(*args: str) -> Any:
    done = CliRunner().invoke(main, list(args), env={"COLUMNS": "80"})
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def api_json(app: oncely.App, path: str, query: str = "") -> Any:
    answer = call(dashboard(app), "GET", path, query=query)
    assert answer.status == 200, answer.body
    return json.loads(answer.body)


def test_api_schedules_are_the_documents_oncely_jobs_prints(served_app: Any) -> None:
    spec, app = served_app
    listed = [d for d in cli_json("jobs", spec, "--json") if d["key"] is not None]
    page = api_json(app, "/api/schedules", "limit=500")["schedules"]
    assert [{k: v for k, v in d.items() if k != "state"} for d in page] == listed


def test_api_schedule_holds_what_oncely_explain_prints(served_app: Any) -> None:
    spec, app = served_app
    explained = cli_json("explain", spec, "sync", "-n", "10", "--recent", "60", "--json")
    document = api_json(app, "/api/schedules/sync")
    assert {k: document[k] for k in explained} == explained
    history = cli_json("history", spec, "sync", "--json")
    assert [
        {k: v for k, v in o.items() if k not in ("summary", "late")} for o in document["history"]
    ] == history
