"""Version 1 of a deployed app: `report` every 2 s, and `legacy` every second."""

from __future__ import annotations

import os

from _record import record

import oncely

app = oncely.App(os.environ["ONCELY_DATABASE_URL"])


@app.job(oncely.every(seconds=2))
def report(run: oncely.Run) -> None:
    record(run, "v1")


@app.job(oncely.every(seconds=1))
def legacy(run: oncely.Run) -> None:
    record(run, "v1")
