"""The jobs of the plain-gunicorn example: one every second, saying which process ran it."""

from __future__ import annotations

import logging
import os

import oncely

log = logging.getLogger(__name__)

app = oncely.App()  # $ONCELY_DATABASE_URL, else sqlite:///oncely.db in the working directory


@app.job(oncely.every(seconds=1))
def heartbeat(run: oncely.Run) -> None:
    log.info("heartbeat %s in process %d", run.scheduled_for.isoformat(), os.getpid())
