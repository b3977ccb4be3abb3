"""The Django app config: reads the ``ONCELY_*`` settings and starts the loop when serving."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from django.apps import AppConfig
from django.conf import settings

from oncely.app import App
from oncely.integrations._loading import resolve

_MANAGE = {"manage.py", "django-admin", "django-admin.py"}


class OncelyConfig(AppConfig):  # type: ignore[misc]  # Django ships no type information
    name = "oncely.integrations.django"
    label = "oncely"
    verbose_name = "oncely"

    def ready(self) -> None:
        if getattr(settings, "ONCELY_EMBEDDED", True) and serving(sys.argv, os.environ):
            scheduler().start(concurrency=getattr(settings, "ONCELY_CONCURRENCY", 8))


def scheduler() -> App:
    """The `oncely.App` that ``settings.ONCELY_APP`` names. Raises `ConfigurationError`."""
    return resolve(getattr(settings, "ONCELY_APP", None) or "")


def serving(argv: Sequence[str], environ: dict[str, str] | os._Environ[str]) -> bool:
    """Whether this process serves requests: not a management command other than
    ``runserver``, and not ``runserver``'s autoreloader (which only restarts the server)."""
    program = Path(argv[0]) if argv else Path()
    # `python -m django` runs django/__main__.py; `python -m gunicorn` is gunicorn/__main__.py.
    managing = program.name in _MANAGE or program.parts[-2:] == ("django", "__main__.py")
    if not managing:
        return True  # a server (gunicorn, uwsgi, uvicorn, daphne) or another program
    command = argv[1] if len(argv) > 1 else ""
    if command != "runserver":
        return False
    return environ.get("RUN_MAIN") == "true" or "--noreload" in argv
