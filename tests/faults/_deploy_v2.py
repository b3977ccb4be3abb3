"""Version 2 of the app of _deploy_v1.py: `report` every 3 s instead of 2, `legacy` removed, and
a new job, `fresh`, every second."""

from __future__ import annotations

import os

from _record import record

import oncely

app = oncely.App(os.environ["ONCELY_DATABASE_URL"])


@app.job(oncely.every(seconds=3))
def report(run: oncely.Run) -> None:
    record(run, "v2")


@app.job(oncely.every(seconds=1))
def fresh(run: oncely.Run) -> None:
    record(run, "v2")
