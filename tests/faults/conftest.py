"""The fault suite (issue 7): real `oncely run` processes through kills, pauses, outages, skewed
clocks, a rolling deploy and hostile input, each scenario counting what happened.

Every test here carries the ``faults`` marker. ``make test`` runs the short version;
``ONCELY_FAULTS=long`` (``make faults``) the long one. Each scenario reports its counts with
``report(...)``: printed at once (``-s``) and again together at the end of the session.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _faults import HERE, LONG

_REPORTS = pytest.StashKey[list[str]]()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects, so `-m faults` sees the marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.faults)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = terminalreporter.config.stash.get(_REPORTS, [])
    if lines:
        version = "long" if LONG else "short"
        terminalreporter.section(f"fault counts ({version} version)")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
def report(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``report(line)``: one line of a scenario's counts, named after its module."""
    name = request.node.path.stem.removeprefix("test_")

    def add(line: str) -> None:
        print(line)
        request.config.stash.setdefault(_REPORTS, []).append(f"{name}: {line}")

    return add
