"""gunicorn configuration running oncely's loop in every worker process.

::

    cd examples/gunicorn_app
    gunicorn -c gunicorn.conf.py

``post_fork`` starts the loop in each worker after it is forked, so ``preload_app`` is safe: the
master imports the app but runs no loop, and no worker shares the master's connections or
threads. ``worker_exit`` drains the loop before gunicorn's ``graceful_timeout`` runs out.
"""

import logging

from oncely.integrations import gunicorn as oncely_hooks

wsgi_app = "wsgi:application"
bind = "127.0.0.1:8000"
workers = 4
preload_app = True

post_fork = oncely_hooks.post_fork("jobs:app")
worker_exit = oncely_hooks.worker_exit("jobs:app")

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(message)s")
