"""Smoke test of bench/recurrence.py: it runs and prints a row for every rule; no timings."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "recurrence.py"

EXPECTED_ROWS = (
    'cron "0 9 * * MON-FRI" Europe/Berlin',
    'cron "*/5 * * * *" UTC',
    "every(minutes=5)",
    "rrule FREQ=DAILY;BYHOUR=9",
    "rrule FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE,FR;BYHOUR=9",
    "rrule FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18",
    "rrule FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU",
    "rrule FREQ=HOURLY;INTERVAL=3",
    "rrule FREQ=DAILY;COUNT=20000;BYHOUR=9",
    "dateutil .after() FREQ=DAILY;BYHOUR=9 (peer)",
)


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_recurrence", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _rows(out: str) -> dict[str, list[str]]:
    """Map each table row's label to the figures after it (both tables, in order)."""
    rows: dict[str, list[str]] = {}
    for line in out.splitlines():
        for label in sorted(EXPECTED_ROWS, key=len, reverse=True):
            if line.startswith(label + " "):
                rows.setdefault(label, []).append(line[len(label) :])
                break
    return rows


def test_quick_run_prints_a_row_for_every_rule(
    bench: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_json = tmp_path / "bench.json"
    assert bench.main(["--quick", "--runs", "1", "--json", str(out_json)]) == 0

    out = capsys.readouterr().out
    rows = _rows(out)
    assert set(rows) == set(EXPECTED_ROWS), out
    for label in EXPECTED_ROWS:
        figures = rows[label][0].split()
        # Triggers without a start have one figure; aged series have 1d, 10y and the ratio.
        assert len(figures) == (1 if label.startswith(("cron", "every")) else 3), rows[label]
        assert all(float(f.replace(",", "")) > 0 for f in figures), rows[label]
    # The first-call table names every one of oncely's RRULEs, the COUNT rule among them.
    assert len(rows["rrule FREQ=DAILY;COUNT=20000;BYHOUR=9"]) == 2

    data = json.loads(out_json.read_text())
    assert [r["rule"] for r in data["results"]] == list(EXPECTED_ROWS)
    assert data["runs"] == 1
    assert data["quick"] is True
