"""A plain WSGI app (no framework) that shows the last runs of the job in jobs.py."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from jobs import app


def application(
    environ: dict[str, Any], start_response: Callable[[str, list[tuple[str, str]]], Any]
) -> Iterable[bytes]:
    beats = [
        {"at": o.scheduled_for.isoformat(), "by": o.worker, "status": o.status}
        for o in app.history("heartbeat", limit=5)
    ]
    body = json.dumps({"pid": os.getpid(), "beats": beats}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]
