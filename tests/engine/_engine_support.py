"""What the engine tests share besides fixtures: the start time, the app factory's type.

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
