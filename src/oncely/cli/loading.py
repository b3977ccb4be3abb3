"""Finding the user's app from ``MODULE:APP``, the way every `oncely` command names it."""

from __future__ import annotations

import importlib
import os
import sys

import click

from oncely.app import App


def load_app(spec: str) -> App:
    """Import ``MODULE`` (from the working directory too) and return its attribute ``APP``.

    Raises `click.UsageError` (exit 2) naming what is missing and what to write instead.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise click.UsageError(f"{spec!r} is not MODULE:APP; e.g. myservice.tasks:app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise click.UsageError(
                f"cannot import module {module_name!r} (run from the directory that holds it, "
                "or install it)"
            ) from exc
        raise
    found = getattr(module, attribute, None)
    if not isinstance(found, App):
        what = "has no attribute" if found is None else "has, but it is not an oncely.App:"
        raise click.UsageError(f"module {module_name!r} {what} {attribute!r}")
    return found
