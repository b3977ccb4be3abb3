"""Finding the user's app from ``MODULE:APP``, the way every `oncely` command names it."""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from oncely.app import App
from oncely.cli.output import one_line
from oncely.errors import OncelyError, StoreUnavailable, UnknownSchedule

_POOL_LOGGER = "psycopg.pool"


def load_app(spec: str) -> App:
    """Import ``MODULE`` (from the working directory too) and return its attribute ``APP``.

    Raises `click.UsageError` (exit 2) naming what is missing and what to write instead.
    """
    module_name, sep, attribute = spec.rpartition(":")
    if not sep or not module_name or not attribute:
        raise click.UsageError(f"{spec!r} is not MODULE:APP; e.g. myservice.tasks:app")
    if "/" in module_name or "\\" in module_name or module_name.endswith(".py"):
        raise click.UsageError(
            f"{spec!r} is a file path; name the module instead: {_module_of(module_name)}:"
            f"{attribute} (run from the directory that holds it)"
        )
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
    missing = object()
    found = getattr(module, attribute, missing)
    if found is missing:
        apps = sorted(name for name, value in vars(module).items() if isinstance(value, App))
        hint = f"; it has {', '.join(f'{module_name}:{n}' for n in apps)}" if apps else ""
        raise click.UsageError(f"module {module_name!r} has no attribute {attribute!r}{hint}")
    if not isinstance(found, App):
        raise click.UsageError(
            f"{attribute!r} in module {module_name!r} is {_kind(found)}, not an oncely.App; "
            "MODULE:APP names the App object, e.g. app = oncely.App()"
        )
    return found


def _module_of(path: str) -> str:
    """The module name a file path would be imported as from its directory: ``./a/b.py`` is
    ``a.b``."""
    name = path.replace("\\", "/").removesuffix(".py").removesuffix("/__init__")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    return ".".join(parts) or "tasks"


def _kind(value: object) -> str:
    if inspect.isfunction(value) or inspect.isbuiltin(value):
        return "a function"
    if inspect.isclass(value):
        return "a class"
    if inspect.ismodule(value):
        return "a module"
    return f"a {type(value).__name__}"


@contextmanager
def app_in_use(spec: str, *, key: str | None = None, tenant: str | None = None) -> Iterator[App]:
    """Load the app named by ``spec`` for one command, and close it afterwards, however it ends.

    An `OncelyError` from the body (or from the app's own module) becomes a one-line
    `click.ClickException` (exit 1). `UnknownSchedule` for ``key`` names the key and the command
    that lists the keys, and the tenant to pass when the key is in another tenant. The database
    driver's warnings (one multi-line warning per failed connection attempt) are held back; a
    `StoreUnavailable` error carries the last one, on its one line.
    """
    with _driver_warnings() as driver:
        try:
            app = load_app(spec)
        except OncelyError as exc:
            raise click.ClickException(one_line(str(exc))) from exc
        try:
            yield app
        except UnknownSchedule as exc:
            if key is None:
                raise click.ClickException(one_line(str(exc))) from exc
            raise click.ClickException(_unknown_key(app, spec, key, tenant)) from exc
        except StoreUnavailable as exc:
            cause = f" ({driver.last})" if driver.last else ""
            raise click.ClickException(one_line(f"{exc}{cause}")) from exc
        except OncelyError as exc:
            raise click.ClickException(one_line(str(exc))) from exc
        finally:
            app.close()


class _LastWarning(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


@contextmanager
def _driver_warnings() -> Iterator[_LastWarning]:
    logger = logging.getLogger(_POOL_LOGGER)
    handler = _LastWarning()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _unknown_key(app: App, spec: str, key: str, tenant: str | None) -> str:
    where = "" if tenant is None else f" in tenant {tenant!r}"
    message = f"no schedule has key {key!r}{where}"
    try:
        found = app.schedules(key_prefix=key, limit=None)
        elsewhere = {s.tenant for s in found if s.key == key and s.tenant != tenant}
    except OncelyError:  # the hint is a courtesy; the error is the unknown key
        elsewhere = set()
    if None in elsewhere:
        message += " (it has one outside any tenant: leave out --tenant)"
    elif elsewhere:
        names = sorted(t for t in elsewhere if t is not None)
        message += f" (tenant {names[0]!r} has one: pass --tenant {names[0]}"
        message += f", or another of {', '.join(map(repr, names))})" if len(names) > 1 else ")"
    return f"{message}; `oncely jobs {spec}` lists the keys"
