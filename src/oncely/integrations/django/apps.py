"""The Django app config: reads the ``ONCELY_*`` settings and starts the loop where requests are
served (the process rule: `serving`)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Collection, Sequence
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from django.apps import AppConfig
from django.conf import settings

from oncely.app import App
from oncely.arguments import checked_retention, shown
from oncely.errors import ConfigurationError
from oncely.integrations._loading import resolve
from oncely.worker import DEFAULT_CONCURRENCY, parse_address

log = logging.getLogger("oncely")

_MANAGE = {"manage.py", "django-admin", "django-admin.py"}
#: The servers whose processes serve requests, by the module each has imported by the time it
#: sets Django up (it is what imports the project's WSGI or ASGI module), however it was started.
SERVERS = {
    "gunicorn": "gunicorn",
    "uvicorn": "uvicorn",
    "daphne": "daphne",
    "hypercorn": "hypercorn",
    "uwsgi": "uWSGI",
    "mod_wsgi": "mod_wsgi",
    "waitress": "waitress",
}
# Programs that set Django up and serve nothing, whatever they import: a test suite may import
# uvicorn, a Celery worker may import the project's WSGI module.
_NEVER = {"celery", "pytest", "py.test"}
_EMBEDDED = (
    'give True (start the loop in processes that serve requests), "always" (in every process '
    "that sets Django up, manage.py oncely_run apart) or False (never; run manage.py oncely_run)"
)


class OncelyConfig(AppConfig):  # type: ignore[misc]  # Django ships no type information
    name = "oncely.integrations.django"
    label = "oncely"
    verbose_name = "oncely"

    def ready(self) -> None:
        embedded = getattr(settings, "ONCELY_EMBEDDED", True)
        if not (embedded is True or embedded is False or embedded == "always"):
            raise ConfigurationError(f"settings.ONCELY_EMBEDDED={shown(embedded)}: {_EMBEDDED}")
        options = start_options(settings)  # in every process: a bad setting fails `check` too
        if embedded is False:
            return
        if embedded == "always":
            if management_command(sys.argv) != "oncely_run":  # it runs a loop of its own
                scheduler().start(**options)
        elif serving(sys.argv, os.environ, sys.modules):
            if _in_gunicorns_master():
                log.info(
                    "oncely: not starting the loop in gunicorn's master process (--preload): it "
                    "serves no requests, and the workers forked from it do not set Django up "
                    "again; start it in each worker with oncely.integrations.gunicorn's post_fork "
                    "hook, and set ONCELY_EMBEDDED = False"
                )
                return
            scheduler().start(**options)
        elif _setting_up_a_server():
            log.info(
                "oncely: not starting the loop in this process: it sets Django up for a WSGI or "
                "ASGI server oncely does not know (it starts the loop under %s, and in runserver); "
                'set ONCELY_EMBEDDED = "always" to start it here, or run manage.py oncely_run',
                ", ".join(SERVERS.values()),
            )


def scheduler() -> App:
    """The `oncely.App` that ``settings.ONCELY_APP`` names. Raises `ConfigurationError`."""
    return resolve(getattr(settings, "ONCELY_APP", None) or "")


def start_options(config: object) -> dict[str, Any]:
    """The `oncely.App.start` options that ``config``'s ``ONCELY_*`` settings give.

    ``ONCELY_CONCURRENCY`` (default 8), ``ONCELY_HTTP`` (``"HOST:PORT"`` or
    ``"HOST:FIRST-LAST"``; default None, no endpoint) and ``ONCELY_RETENTION`` (a timedelta or a
    duration as ``oncely run --retention`` reads it, ``"30d"``; default 30 days). Raises
    `ConfigurationError` naming the setting and what to give.
    """
    concurrency = getattr(config, "ONCELY_CONCURRENCY", DEFAULT_CONCURRENCY)
    if type(concurrency) is not int or concurrency < 1:
        raise ConfigurationError(
            f"settings.ONCELY_CONCURRENCY={shown(concurrency)}: give a whole number of handlers "
            "to run at once in each process, 1 or more"
        )
    http = getattr(config, "ONCELY_HTTP", None)
    if http is not None:
        if not isinstance(http, str):
            raise ConfigurationError(
                f"settings.ONCELY_HTTP={shown(http)}: give None (no /healthz and /metrics) or "
                '"HOST:PORT", or a range of ports for several processes, "127.0.0.1:9464-9471"'
            )
        try:
            parse_address(http)
        except ConfigurationError as exc:
            raise ConfigurationError(f"settings.ONCELY_HTTP: {exc}") from None
    retention = checked_retention(
        getattr(config, "ONCELY_RETENTION", timedelta(days=30)), "settings.ONCELY_RETENTION"
    )
    return {"concurrency": concurrency, "http": http, "retention": retention}


def management_command(argv: Sequence[str]) -> str | None:
    """The management command ``argv`` runs (``""`` for none given), or None when the program
    is not ``manage.py``, ``django-admin`` or ``python -m django``."""
    program = Path(argv[0]) if argv else Path()
    # `python -m django` runs django/__main__.py; `python -m gunicorn` is gunicorn/__main__.py.
    if program.name in _MANAGE or program.parts[-2:] == ("django", "__main__.py"):
        return argv[1] if len(argv) > 1 else ""
    return None


def serving(
    argv: Sequence[str], environ: dict[str, str] | os._Environ[str], modules: Collection[str]
) -> bool:
    """Whether this process serves requests: ``runserver``'s serving process (not its
    autoreloader, which only restarts it), or a process of one of the `SERVERS` (its module is
    in ``modules``); never another management command, a Celery worker or pytest.

    Read from what the process imported rather than from its program's name: a server has as
    many names as ways to start it (``gunicorn``, ``python -m gunicorn``, ``uvicorn.run()`` or
    ``waitress.serve()`` in a script of yours, uWSGI and mod_wsgi, which embed Python in their
    own program, uvicorn's workers spawned by multiprocessing), and a script or a Celery worker
    that calls ``django.setup()`` has its own name and imports no server.
    """
    command = management_command(argv)
    if command is not None:
        if command != "runserver":
            return False
        return environ.get("RUN_MAIN") == "true" or "--noreload" in argv
    program = Path(argv[0]) if argv else Path()
    name = program.parent.name if program.name == "__main__.py" else program.name
    if name in _NEVER:
        return False
    return any(module in modules for module in SERVERS)


def _in_gunicorns_master() -> bool:
    """Whether Django is being set up by gunicorn's master (``--preload``), not by a worker.

    A worker's stack holds the master's frames too (it was forked inside them), and the
    worker's own (``gunicorn.workers``) above them.
    """
    modules = set()
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        modules.add(str(frame.f_globals.get("__name__", "")))
        frame = frame.f_back
    return "gunicorn.arbiter" in modules and not any(
        module.startswith("gunicorn.workers.") for module in modules
    )


def _setting_up_a_server() -> bool:
    """Whether Django is being set up by ``get_wsgi_application()`` or
    ``get_asgi_application()``: what a server does, and a script seldom."""
    from django.core.asgi import get_asgi_application
    from django.core.wsgi import get_wsgi_application

    entries = {get_wsgi_application.__code__, get_asgi_application.__code__}
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        if frame.f_code in entries:
            return True
        frame = frame.f_back
    return False
