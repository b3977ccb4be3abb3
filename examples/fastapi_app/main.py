"""FastAPI with oncely inside every server process: no separate scheduler to deploy.

Run it with any number of server processes; the every-second job still runs once per second::

    cd examples/fastapi_app
    uvicorn main:api --workers 4                                      # SQLite: ./oncely.db
    ONCELY_DATABASE_URL=postgresql://postgres@127.0.0.1/test \\
        gunicorn main:api -w 4 -k uvicorn_worker.UvicornWorker        # PostgreSQL

``GET /`` shows the last beats and which process wrote each. The job is transactional: its row in
``heartbeats`` commits together with the occurrence's completion, so each occurrence leaves exactly
one row, whichever process ran it and however often the servers restart.

``POST /users/42/reminders?minutes=5`` books a durable one-off reminder for user 42, and
``POST /reminders?minutes=5&users=1&users=2`` one for each user in one transaction. The handlers
are ``async`` and await oncely's ``_async`` calls, so the event loop is never blocked by them.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import FastAPI, Query

import oncely
from oncely.integrations.starlette import running

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(message)s")

app = oncely.App()  # $ONCELY_DATABASE_URL, else sqlite:///oncely.db in the working directory

CREATE = "CREATE TABLE IF NOT EXISTS heartbeats (scheduled_for TEXT NOT NULL, pid INTEGER NOT NULL)"


@app.job(oncely.every(seconds=1), delivery="transactional")
def heartbeat(run: oncely.Run) -> None:
    mark = "?" if isinstance(run.connection, sqlite3.Connection) else "%s"
    run.connection.execute(
        f"INSERT INTO heartbeats (scheduled_for, pid) VALUES ({mark}, {mark})",
        (run.scheduled_for.isoformat(), os.getpid()),
    )


@app.job()
def remind(run: oncely.Run) -> None:
    logging.info("reminding user %s (booked for %s)", run.payload["user"], run.scheduled_for)


@asynccontextmanager
async def lifespan(api: FastAPI) -> AsyncIterator[None]:
    # Every process starting at once would race to create the table; one at a time, under a lock.
    with (
        app.lock("example:create-heartbeats", at_most=timedelta(seconds=30), blocking=True),
        app.store.transaction() as connection,
    ):
        connection.execute(CREATE)
    async with running(app):
        yield


api = FastAPI(lifespan=lifespan)


@api.get("/")
async def index() -> dict[str, Any]:
    beats = await app.history_async("heartbeat", limit=5)
    return {
        "pid": os.getpid(),
        "beats": [{"at": o.scheduled_for.isoformat(), "by": o.worker} for o in beats],
    }


@api.post("/users/{user}/reminders")
async def book_reminder(user: int, minutes: float = 5) -> dict[str, Any]:
    at = datetime.now(UTC) + timedelta(minutes=minutes)
    # The key makes a retried request book the same reminder, not a second one.
    timer = await app.defer_async(remind, at=at, key=f"remind:{user}:{at:%Y%m%d%H%M}",
                                  payload={"user": user})  # fmt: skip
    return {"key": timer.key, "at": at.isoformat()}


@api.post("/reminders")
async def book_reminders(
    users: Annotated[list[int], Query()], minutes: float = 5
) -> dict[str, Any]:
    at = datetime.now(UTC) + timedelta(minutes=minutes)
    items = [
        {"at": at, "key": f"remind:{user}:{at:%Y%m%d%H%M}", "payload": {"user": user}}
        for user in users
    ]
    timers = await app.defer_many_async(remind, items)  # all of them, or none
    return {"keys": [t.key for t in timers]}
