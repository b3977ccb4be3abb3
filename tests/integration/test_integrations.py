"""oncely.integrations in-process: the Starlette lifespan, the Flask extension, the gunicorn hooks,
Django's process test, and that ``import oncely`` imports no web framework."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from flask import Flask

import oncely
from _processes import free_port, free_ports, http_get, wait_until
from oncely.arguments import Retention
from oncely.errors import ConfigurationError
from oncely.integrations import gunicorn as hooks
from oncely.integrations._loading import resolve
from oncely.integrations.flask import Oncely
from oncely.integrations.starlette import lifespan

# No proxy from the environment may stand between the test and 127.0.0.1.


def _serving(app: oncely.App) -> bool:
    embedded = app._embedded
    return embedded is not None and embedded.worker is not None


def _loops() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "oncely-worker" and t.is_alive())


@pytest.fixture
def app(sqlite_url: str) -> oncely.App:
    return oncely.App(sqlite_url)


def test_import_oncely_imports_no_web_framework() -> None:
    code = (
        "import sys, oncely, oncely.integrations; "
        "print(sorted(m for m in ('fastapi', 'starlette', 'anyio', 'flask', 'django', "
        "'gunicorn', 'uvicorn') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_starlette_lifespan_starts_the_loop_and_drains_it_off_the_event_loop(
    app: oncely.App,
) -> None:
    entered, release = threading.Event(), threading.Event()

    @app.job()
    def stuck(run: oncely.Run) -> None:
        entered.set()
        release.wait(30)

    app.defer(stuck, at=datetime.now(UTC), key="stuck")

    async def serve() -> tuple[bool, int]:
        ticks = 0

        async def count() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        async with lifespan(app, stop_timeout=1)(object()):
            started = _serving(app)
            assert await asyncio.to_thread(entered.wait, 10)
            counter = asyncio.create_task(count())
        # Shutdown waited out the running handler for most of a second; the event loop ran on.
        counter.cancel()
        return started, ticks

    try:
        started, ticks = asyncio.run(serve())
    finally:
        release.set()
    assert started
    assert not _serving(app)
    assert _loops() == 0
    assert ticks > 20


def test_the_flask_extension_starts_the_loop_where_the_flask_app_is_set_up(
    app: oncely.App,
) -> None:
    ran = threading.Event()

    @app.job()
    def note(run: oncely.Run) -> None:
        ran.set()

    web = Flask("example")
    deferred = Oncely(app, start=False)
    deferred.init_app(web)
    assert web.extensions["oncely"] is deferred
    assert not _serving(app)
    app.defer(note, at=datetime.now(UTC), key="flask")
    extension = Oncely(app, web, concurrency=2)
    try:
        assert web.extensions["oncely"] is extension
        assert _serving(app)
        assert ran.wait(10), "the job did not run"
    finally:
        app.stop(timeout=5)


def test_the_gunicorn_hooks_start_in_the_worker_and_stop_before_the_kill(
    app: oncely.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = SimpleNamespace(cfg=SimpleNamespace(graceful_timeout=10))
    hooks.post_fork(app, concurrency=2)(object(), worker)
    assert _serving(app)
    stops: list[float] = []
    real_stop = oncely.App.stop

    def stop(self: oncely.App, timeout: float = 30.0) -> None:
        stops.append(timeout)
        real_stop(self, timeout)

    monkeypatch.setattr(oncely.App, "stop", stop)
    hooks.worker_exit(app)(object(), worker)
    assert not _serving(app)
    hooks.worker_exit(app, timeout=3)(object(), worker)
    big = SimpleNamespace(cfg=SimpleNamespace(graceful_timeout=300))
    hooks.worker_exit(app)(object(), big)
    # 2 s before gunicorn's kill; never more than stop()'s own default.
    assert stops == [8.0, 3, 30.0]


def _serves_as_given(app: oncely.App, address: str, retention: timedelta) -> None:
    """The loop ``app`` runs serves /healthz and /metrics at ``address`` and keeps history for
    ``retention``: the integration handed both to the worker."""
    embedded = app._embedded
    worker = embedded.worker if embedded is not None else None
    assert worker is not None, "no loop is running"
    assert worker.http_address == address
    assert worker.housekeeping.retention.default == retention
    wait_until(lambda: http_get(address, "/healthz")[0] == 200, 20, "/healthz to answer 200")
    code, body = http_get(address, "/metrics")
    assert code == 200
    assert b"# TYPE oncely_in_flight gauge" in body


def test_the_starlette_lifespan_hands_http_and_retention_to_the_worker(app: oncely.App) -> None:
    address = f"127.0.0.1:{free_port()}"

    async def serve() -> None:
        given = lifespan(app, stop_timeout=5, http=address, retention=timedelta(days=7))
        async with given(object()):
            await asyncio.to_thread(_serves_as_given, app, address, timedelta(days=7))

    asyncio.run(serve())
    assert not _serving(app)


def test_the_flask_extension_hands_http_and_retention_to_the_worker(app: oncely.App) -> None:
    address = f"127.0.0.1:{free_port()}"
    Oncely(app, Flask("example"), http=address, retention="7d")
    try:
        _serves_as_given(app, address, timedelta(days=7))
    finally:
        app.stop(timeout=5)


def test_the_gunicorn_hook_hands_http_and_retention_to_the_worker(app: oncely.App) -> None:
    """With a port range, as N gunicorn workers share one: the first port taken by another
    worker, this one listens on the next."""
    ports = free_ports(2)
    worker = SimpleNamespace(cfg=SimpleNamespace(graceful_timeout=10))
    with socket.socket() as other_worker:
        other_worker.bind(("127.0.0.1", ports[0]))
        other_worker.listen()
        hooks.post_fork(app, http=f"127.0.0.1:{ports[0]}-{ports[1]}", retention="36h")(
            object(), worker
        )
        try:
            _serves_as_given(app, f"127.0.0.1:{ports[1]}", timedelta(hours=36))
        finally:
            hooks.worker_exit(app)(object(), worker)
    assert not _serving(app)


def test_an_app_named_by_module_and_attribute_is_imported_when_needed(
    app: oncely.App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "named_jobs.py").write_text(
        "import oncely\napp = oncely.App('sqlite:///named.db')\n"
    )
    (tmp_path / "not_an_app.py").write_text("app = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert resolve(app) is app
    found = resolve("named_jobs:app")
    assert isinstance(found, oncely.App)
    assert found.url == "sqlite:///named.db"
    for spec, message in [
        ("named_jobs", "is not 'MODULE:ATTRIBUTE'"),
        ("named_jobs:missing", "has no attribute 'missing'"),
        ("not_an_app:app", "it is not an oncely.App"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            resolve(spec)


_GUNICORN = {"gunicorn", "gunicorn.workers.sync"}


@pytest.mark.parametrize(
    ("argv", "environ", "modules", "serving"),
    [
        (["/usr/bin/gunicorn", "project.wsgi"], {}, _GUNICORN, True),
        (["/srv/venv/bin/uvicorn", "project.asgi:application"], {}, {"uvicorn"}, True),
        (["/srv/venv/lib/python3.11/site-packages/gunicorn/__main__.py"], {}, _GUNICORN, True),
        (["/srv/venv/bin/daphne", "project.asgi:application"], {}, {"daphne"}, True),
        (["/srv/venv/bin/hypercorn", "project.asgi:application"], {}, {"hypercorn"}, True),
        (["uwsgi"], {}, {"uwsgi"}, True),
        ([], {}, {"uwsgi"}, True),
        (["mod_wsgi"], {}, {"mod_wsgi"}, True),
        (["serve.py"], {}, {"waitress"}, True),  # waitress.serve(application) in a script
        (["-c"], {}, {"uvicorn"}, True),  # uvicorn --workers: spawned by multiprocessing
        (["report.py"], {}, set(), False),  # a script calling django.setup()
        ([], {}, set(), False),
        (["/srv/venv/bin/celery", "-A", "project", "worker"], {}, {"celery"}, False),
        (["/srv/venv/lib/python3.11/site-packages/celery/__main__.py"], {}, _GUNICORN, False),
        (["/srv/venv/bin/pytest", "tests"], {}, {"pytest", "uvicorn"}, False),
        (["manage.py", "migrate"], {}, set(), False),
        (["manage.py", "oncely_run"], {}, set(), False),
        (["manage.py", "shell"], {}, _GUNICORN, False),
        (["/srv/venv/bin/django-admin", "shell"], {}, set(), False),
        (["/usr/lib/python3/site-packages/django/__main__.py", "check"], {}, set(), False),
        (["manage.py", "runserver"], {}, set(), False),  # the autoreloader, which serves nothing
        (["manage.py", "runserver"], {"RUN_MAIN": "true"}, set(), True),
        (["manage.py", "runserver", "--noreload"], {}, set(), True),
        (["manage.py", "runserver"], {"RUN_MAIN": "true"}, {"daphne"}, True),
    ],
)
def test_django_starts_the_loop_only_in_processes_that_serve(
    argv: list[str], environ: dict[str, str], modules: set[str], serving: bool
) -> None:
    from oncely.integrations.django.apps import serving as decide

    assert decide(argv, environ, modules) is serving


def test_django_settings_give_every_start_option() -> None:
    from oncely.integrations.django.apps import start_options

    assert start_options(SimpleNamespace()) == {
        "concurrency": 8,
        "http": None,
        "retention": Retention(timedelta(days=30)),
    }
    given = SimpleNamespace(
        ONCELY_CONCURRENCY=3, ONCELY_HTTP="127.0.0.1:9464-9471", ONCELY_RETENTION="12w"
    )
    assert start_options(given) == {
        "concurrency": 3,
        "http": "127.0.0.1:9464-9471",
        "retention": Retention(timedelta(weeks=12)),
    }
    timed = SimpleNamespace(ONCELY_RETENTION=timedelta(hours=36))
    assert start_options(timed)["retention"] == Retention(timedelta(hours=36))
    failures = SimpleNamespace(ONCELY_RETENTION="30d,failed=90d")
    kept = Retention(timedelta(days=30), {"failed": timedelta(days=90)})
    assert start_options(failures)["retention"] == kept


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("ONCELY_CONCURRENCY", 0, "settings.ONCELY_CONCURRENCY=0: give a whole number of "),
        ("ONCELY_CONCURRENCY", "8", "settings.ONCELY_CONCURRENCY='8': give a whole number "),
        ("ONCELY_HTTP", 9464, "settings.ONCELY_HTTP=9464: give None (no /healthz and /metr"),
        ("ONCELY_HTTP", "127.0.0.1", "settings.ONCELY_HTTP: HTTP address '127.0.0.1' has no "),
        ("ONCELY_HTTP", "127.0.0.1:9471-9464", "settings.ONCELY_HTTP: HTTP address '127.0.0"),
        ("ONCELY_RETENTION", "30 days", "settings.ONCELY_RETENTION='30 days': give how long "),
        ("ONCELY_RETENTION", timedelta(0), "settings.ONCELY_RETENTION=datetime.timedelta(0)"),
        ("ONCELY_RETENTION", 30, "settings.ONCELY_RETENTION=30: give how long to keep hist"),
    ],
)
def test_a_bad_django_setting_is_refused_naming_it_and_what_to_give(
    setting: str, value: object, message: str
) -> None:
    from oncely.integrations.django.apps import start_options

    with pytest.raises(ConfigurationError) as refused:
        start_options(SimpleNamespace(**{setting: value}))
    assert str(refused.value).startswith(message), str(refused.value)


def test_stop_timeouts_that_make_no_sense_are_refused(app: oncely.App) -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        app.stop(timeout="soon")  # type: ignore[arg-type]
    started = time.monotonic()
    app.stop(timeout=0)
    assert time.monotonic() - started < 0.1


# A value of each `oncely run` option that it accepts, and one that it refuses (None: any text).
_RUN_SAMPLES: dict[str, tuple[str, str | None]] = {
    "--concurrency": ("3", "0"),
    "--drain-timeout": ("2.5", "-1"),
    "--http": ("127.0.0.1:9464-9471", None),  # checked when the worker starts, in both
    "--retention": ("7d", "0d"),
    "--log-format": ("json", "xml"),
    "--log-level": ("warning", "LOUD"),
}


def test_django_oncely_run_takes_every_option_of_oncely_run_as_oncely_run_reads_it() -> None:
    """Walks `oncely run`'s options: an option it gains and ``manage.py oncely_run`` does not
    take fails here (``oncely_run`` once took 3 of its 6)."""
    import click
    from django.core.management.base import CommandError

    from oncely.cli.run import run as run_command
    from oncely.integrations.django.management.commands.oncely_run import Command

    parser = Command().create_parser("manage.py", "oncely_run")
    helps = {flag: action.help for action in parser._actions for flag in action.option_strings}
    context = click.Context(run_command)
    options = [p for p in run_command.params if isinstance(p, click.Option)]
    assert len(options) >= 6
    for option in options:
        flag = option.opts[0]
        assert flag in _RUN_SAMPLES, f"add a value of `oncely run {flag}` to _RUN_SAMPLES"
        good, bad = _RUN_SAMPLES[flag]
        try:
            parsed = vars(parser.parse_args([flag, good]))
        except CommandError as exc:
            pytest.fail(f"manage.py oncely_run does not take {flag}: {exc}")
        assert parsed[option.name] == option.process_value(context, good), flag
        assert option.help is None or option.help in (helps[flag] or "").replace("%%", "%")
        if option.show_default:
            assert f"(default: {option.default})" in (helps[flag] or ""), flag
        if bad is not None:
            with pytest.raises(click.BadParameter):
                option.process_value(context, bad)
            with pytest.raises(CommandError, match=f"argument {flag}: "):
                parser.parse_args([flag, bad])
