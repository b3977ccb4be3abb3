"""Options several commands share, spelled and checked the same way in each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from oncely.app import App, TenantView

F = TypeVar("F", bound=Callable[..., Any])


def _tenant(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("a tenant name is a non-empty string", ctx=ctx, param=param)
    return value


def tenant_option(help_text: str) -> Callable[[F], F]:
    """``--tenant T``: the tenant whose schedules the command reads or changes."""
    return click.option(
        "--tenant", metavar="TENANT", default=None, callback=_tenant, help=help_text
    )


def as_json(func: F) -> F:
    """``--json``: print one JSON document, and nothing else, on stdout instead of a table."""
    option = click.option(
        "--json",
        "json_output",
        is_flag=True,
        help="Print JSON (datetimes in ISO 8601) instead of a table, and nothing else.",
    )
    return option(func)


TENANT_OF_KEY = "The tenant the schedule belongs to (default: none)."


def scoped(app: App, tenant: str | None) -> App | TenantView:
    """``app`` itself, or its view bound to ``tenant`` when ``--tenant`` was given."""
    return app if tenant is None else app.for_tenant(tenant)
