"""A minimal Django project running oncely inside every server process (examples/django_app).

::

    cd examples/django_app
    gunicorn project.wsgi --workers 4    # each worker's AppConfig.ready() starts one loop
    python manage.py runserver           # the same, in runserver's serving process
    python manage.py oncely_run          # or: a worker process of its own (ONCELY_EMBEDDED=False)
"""
