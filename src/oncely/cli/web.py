"""`oncely web`: the dashboard, served on this machine (or, with an auth hook, anywhere)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, cast

import click

from oncely.cli.loading import load_app
from oncely.errors import ConfigurationError

DEFAULT_HTTP = "127.0.0.1:8400"
_ACTIONS = ("trigger", "pause", "resume", "backfill", "retry", "release")


def _address(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT; e.g. {DEFAULT_HTTP}")
    return host.strip("[]"), int(port)


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.option(
    "--http", "address", default=DEFAULT_HTTP, show_default=True, callback=_address,
    metavar="HOST:PORT", help="Where to serve. Anything but loopback needs --auth.",
)  # fmt: skip
@click.option(
    "--auth", "auth_spec", metavar="MODULE:FUNC", default=None,
    help="The auth hook: a function of the request returning the person's name, or None.",
)  # fmt: skip
@click.option(
    "--grant", "grants", multiple=True, type=click.Choice(_ACTIONS),
    help="An action everyone --auth names may take (repeat it). Default: none, read-only.",
)  # fmt: skip
def web(
    app_spec: str, address: tuple[str, int], auth_spec: str | None, grants: tuple[str, ...]
) -> None:
    """Serve the dashboard of MODULE:APP: schedules, occurrences, workers, locks, drift.

    Read-only unless --auth names people and --grant gives them actions; without --auth it
    serves loopback (this machine) only. Needs the extra: pip install 'oncely[web]'.
    """
    host, port = address
    try:
        import uvicorn

        from oncely.web import dashboard, is_loopback
    except ImportError as exc:
        raise click.ClickException(
            f"the dashboard needs the web extra ({exc.name} is missing): pip install 'oncely[web]'"
        ) from exc
    if auth_spec is None and not is_loopback(host):
        raise click.UsageError(
            f"--http {host}:{port} is reachable from other machines, and without --auth "
            "anyone there could read every schedule: pass --auth MODULE:FUNC, or serve on "
            "127.0.0.1"
        )
    if grants and auth_spec is None:
        raise click.UsageError("--grant needs --auth: actions are recorded with who took them")
    auth = None if auth_spec is None else _load_function(auth_spec)
    app = load_app(app_spec)
    try:
        asgi = dashboard(app, auth=auth, grants=grants)
    except ConfigurationError as exc:
        app.close()
        raise click.ClickException(str(exc)) from exc
    may = ", ".join(grants) if grants else "read-only"
    click.echo(f"oncely dashboard on http://{host}:{port}/ ({may})")
    try:
        uvicorn.run(asgi, host=host, port=port, log_level="warning", lifespan="on")
    finally:
        app.close()


def _load_function(spec: str) -> Callable[..., Any]:
    module_name, sep, name = spec.rpartition(":")
    if not sep or not module_name or not name:
        raise click.UsageError(f"--auth {spec!r} is not MODULE:FUNC")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise click.UsageError(f"--auth: cannot import module {module_name!r}") from exc
    found = getattr(module, name, None)
    if not callable(found):
        raise click.UsageError(f"--auth: {name!r} in module {module_name!r} is not a function")
    return cast(Callable[..., Any], found)
