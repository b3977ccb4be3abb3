"""Flask: an extension that starts oncely's loop in every process that sets up the Flask app.

::

    from flask import Flask
    from oncely.integrations.flask import Oncely

    web = Flask(__name__)
    Oncely(app, web)            # or: ext = Oncely(app); ext.init_app(web) in an app factory

Each server process that imports the Flask app (gunicorn's workers, ``flask run``) starts one
loop; interpreter exit (a gunicorn worker exiting) drains it. Under ``gunicorn --preload`` the
Flask app is set up once, in the master, before the workers are forked: pass ``start=False`` and
start the loop from gunicorn's ``post_fork`` hook instead (`oncely.integrations.gunicorn`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from oncely.app import App

if TYPE_CHECKING:
    from flask import Flask


class Oncely:
    """The extension object: ``Oncely(app, flask_app=None, ...)``, then `init_app`.

    ``scheduler`` is the `oncely.App` whose jobs run; the Flask app finds this object under
    ``flask_app.extensions["oncely"]``. ``concurrency``, ``http`` and ``retention`` are
    `oncely.App.start`'s; under several processes give ``http`` a range of ports
    (``"127.0.0.1:9464-9471"``), so that each listens on one.
    """

    def __init__(
        self,
        scheduler: App,
        app: Flask | None = None,
        *,
        start: bool = True,
        concurrency: int = 8,
        http: str | None = None,
        retention: timedelta | str = timedelta(days=30),
    ) -> None:
        self.scheduler = scheduler
        self.start = start
        self.concurrency = concurrency
        self.http = http
        self.retention = retention
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Register on ``app`` and, unless ``start=False``, start the loop in this process."""
        app.extensions["oncely"] = self
        if self.start:
            self.scheduler.start(
                concurrency=self.concurrency, http=self.http, retention=self.retention
            )
