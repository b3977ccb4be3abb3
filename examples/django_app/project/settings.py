"""Settings of the example project: only what oncely and one view need."""

import os

SECRET_KEY = "example-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "project.urls"
INSTALLED_APPS = ["oncely.integrations.django"]
DATABASES: dict[str, dict[str, str]] = {}  # Django's own database is not needed here
USE_TZ = True

ONCELY_APP = "project.jobs:app"
# In every process that serves requests (the default), or not: then run `manage.py oncely_run`.
ONCELY_EMBEDDED = os.environ.get("ONCELY_EMBEDDED", "1") != "0"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(process)d %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["stderr"], "level": "INFO"},
}
