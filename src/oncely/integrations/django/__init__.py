"""Django: oncely's loop in every server process, started from ``AppConfig.ready()``.

In ``settings.py``::

    INSTALLED_APPS = [..., "oncely.integrations.django"]
    ONCELY_APP = "myproject.jobs:app"    # MODULE:ATTRIBUTE of your oncely.App
    ONCELY_EMBEDDED = True               # default; False: run `manage.py oncely_run` instead
    ONCELY_CONCURRENCY = 8               # handlers at once in each process (default 8)

``ready()`` starts the loop in processes that serve requests (gunicorn, uWSGI, uvicorn and
daphne workers, and ``runserver``'s serving process, not its autoreloader), never in other
management commands (``migrate``, ``shell``, ``oncely_run``...); interpreter exit drains it. A
test run (pytest-django) sets up Django too: set ``ONCELY_EMBEDDED = False`` in test settings.
``manage.py oncely_run`` is ``oncely run`` with the app from ``ONCELY_APP``, for a worker process
of its own. This package imports Django only when Django loads it.
"""
