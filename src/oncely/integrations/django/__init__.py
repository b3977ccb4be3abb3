"""Django: oncely's loop in every process that serves requests, started from ``AppConfig.ready()``.

In ``settings.py``::

    INSTALLED_APPS = [..., "oncely.integrations.django"]
    ONCELY_APP = "myproject.jobs:app"    # MODULE:ATTRIBUTE of your oncely.App
    ONCELY_EMBEDDED = True               # default; "always"; False: run `manage.py oncely_run`
    ONCELY_CONCURRENCY = 8               # handlers at once in each process (default 8)
    ONCELY_HTTP = "127.0.0.1:9464-9471"  # /healthz and /metrics, a port per process (default off)
    ONCELY_RETENTION = "30d"             # or a timedelta: history housekeeping keeps (default 30d)

With ``ONCELY_EMBEDDED = True``, ``ready()`` starts the loop only where requests are served: in
the processes of gunicorn, uvicorn, daphne, hypercorn, uWSGI, mod_wsgi and waitress (told by the
server's module, imported by then) and in ``runserver``'s serving process (not its
autoreloader); never in other management commands (``migrate``, ``shell``, ``oncely_run``...),
in a script that calls ``django.setup()``, a Celery worker or pytest. ``"always"`` starts it in
every process that sets Django up but ``oncely_run``, for a server the rule does not know (a
process that sets up Django's WSGI or ASGI handler under one says so at INFO). Interpreter exit
drains it. ``manage.py oncely_run`` is ``oncely run``, with all of its options, for the app
``ONCELY_APP`` names, in a worker process of its own. A bad ``ONCELY_*`` setting fails every
process that sets Django up, ``manage.py check`` included. This package imports Django only when
Django loads it.
"""
