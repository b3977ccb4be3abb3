"""``manage.py oncely_run``: `oncely run` for the app ``settings.ONCELY_APP`` names."""

from __future__ import annotations

import logging
from typing import Any

from django.core.management.base import BaseCommand

from oncely.integrations.django.apps import scheduler
from oncely.worker import configure_logging


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no type information
    help = (
        "Run oncely's worker loop in this process until SIGTERM or SIGINT, then drain: any "
        "number of copies, anywhere (as `oncely run` does)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--concurrency", type=int, default=8, help="handlers at once")
        parser.add_argument(
            "--drain-timeout", type=float, default=30.0, help="seconds to let handlers finish"
        )
        parser.add_argument("--http", default=None, help="HOST:PORT for /healthz and /metrics")

    def handle(self, *args: Any, **options: Any) -> None:
        if not logging.getLogger().handlers:  # Django's LOGGING set none: show oncely's lines
            configure_logging("text")
        scheduler().run_worker(
            concurrency=options["concurrency"],
            drain_timeout=options["drain_timeout"],
            http=options["http"],
        )
