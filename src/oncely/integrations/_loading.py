"""The app an integration runs, given as the app itself or as ``"MODULE:ATTRIBUTE"``."""

from __future__ import annotations

import importlib

from oncely.app import App
from oncely.errors import ConfigurationError


def resolve(app: App | str) -> App:
    """``app`` itself, or the `App` that ``"MODULE:ATTRIBUTE"`` names (imported now).

    Raises `ConfigurationError` naming what is wrong; an error raised by the module's own import
    propagates unchanged.
    """
    if isinstance(app, App):
        return app
    if not isinstance(app, str):
        raise ConfigurationError(f"{app!r} is neither an oncely.App nor 'MODULE:ATTRIBUTE'")
    module_name, sep, attribute = app.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"{app!r} is not 'MODULE:ATTRIBUTE'; e.g. 'myservice.jobs:app'")
    found = getattr(importlib.import_module(module_name), attribute, None)
    if not isinstance(found, App):
        what = "has no attribute" if found is None else "has, but it is not an oncely.App:"
        raise ConfigurationError(f"module {module_name!r} {what} {attribute!r}")
    return found
