"""What the engine tests share besides fixtures: the start time, the app factory's type, and a
stored trigger damaged in the database.

The clock they move is `oncely.testing.Clock`, the one oncely's users test with.

Imported by name from the test modules (``from _engine_support import START``); a module named
``conftest`` would be ambiguous, as every test folder has one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import oncely

START = datetime(2026, 11, 30, 8, 59, 30, tzinfo=UTC)


MakeApp = Callable[[], oncely.App]


def damage(app: oncely.App, key: str, spec: str) -> None:
    """Overwrite schedule ``key``'s stored trigger with ``spec``, as a bad write or an old
    version might have left it."""
    marker = "?" if app.store.dialect == "sqlite" else "%s"
    cast = "" if app.store.dialect == "sqlite" else "::jsonb"
    with app.store.transaction() as connection:
        connection.execute(
            f"UPDATE oncely_schedules SET trigger_spec = {marker}{cast} WHERE key = {marker}",
            (spec, key),
        )
