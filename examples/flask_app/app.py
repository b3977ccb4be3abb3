"""Flask with oncely inside every server process: the `Oncely` extension starts the loop.

::

    cd examples/flask_app
    flask --app app run                 # one process
    gunicorn app:web --workers 4        # four processes, one loop each; a job still runs once

``GET /`` shows the job's last runs. Under ``gunicorn --preload`` use ``Oncely(app, web,
start=False)`` and the hooks of examples/gunicorn_app/gunicorn.conf.py instead.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from flask import Flask

import oncely
from oncely.integrations.flask import Oncely

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(message)s")
log = logging.getLogger(__name__)

app = oncely.App()  # $ONCELY_DATABASE_URL, else sqlite:///oncely.db in the working directory


@app.job(oncely.every(seconds=5))
def heartbeat(run: oncely.Run) -> None:
    log.info("heartbeat %s in process %d", run.scheduled_for.isoformat(), os.getpid())


web = Flask(__name__)
Oncely(app, web)


@web.get("/")
def index() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "beats": [
            {"at": o.scheduled_for.isoformat(), "by": o.worker, "status": o.status}
            for o in app.history("heartbeat", limit=5)
        ],
    }
