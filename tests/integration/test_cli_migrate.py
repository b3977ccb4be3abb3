"""`oncely migrate MODULE:APP` in a real process, against each store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from oncely.store import open_store
from oncely.store.queries import migrations


def oncely(cwd: Path, *args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ONCELY_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "oncely.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "empty_postgres_url"
    value: str = request.getfixturevalue(name)
    return value


def test_migrate_applies_then_finds_nothing_to_do(tmp_path: Path, empty_url: str) -> None:
    (tmp_path / "service.py").write_text("import oncely\napp = oncely.App()\n")
    latest = len(migrations("sqlite"))
    first = oncely(tmp_path, "migrate", "service:app", url=empty_url)
    assert first.returncode == 0, first.stderr
    versions = ", ".join(str(v) for v in range(1, latest + 1))
    assert first.stdout.strip() == f"applied migrations {versions}; schema version {latest}"
    again = oncely(tmp_path, "migrate", "service:app", url=empty_url)
    assert again.stdout.strip() == f"schema version {latest}: up to date"
    store = open_store(empty_url)
    assert store.schema_version() == latest
    store.close()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("service", "is not MODULE:APP"),
        ("nowhere:app", "cannot import module 'nowhere'"),
        ("service:missing", "has no attribute 'missing'"),
        ("service:oncely", "not an oncely.App"),
    ],
)
def test_a_bad_app_spec_says_what_to_write(tmp_path: Path, spec: str, message: str) -> None:
    (tmp_path / "service.py").write_text("import oncely\napp = oncely.App()\n")
    done = oncely(tmp_path, "migrate", spec, url=f"sqlite:///{tmp_path / 'x.db'}")
    assert done.returncode == 2
    assert message in done.stderr
