"""What the lock tests share besides fixtures (imported by name: a module named conftest would
be ambiguous, as every test folder has one)."""

from __future__ import annotations

from dataclasses import dataclass

import oncely
from oncely.locks import LockProvider


@dataclass
class Provided:
    """How a test makes apps and a provider that all see the same locks."""

    kind: str
    url: str  # the app database
    redis_url: str | None

    def app(self) -> oncely.App:
        return oncely.App(self.url)

    def provider(self, app: oncely.App) -> LockProvider | None:
        """None: the app's own store; else a Redis provider."""
        if self.redis_url is None:
            return None
        return oncely.locks.redis(self.redis_url)
