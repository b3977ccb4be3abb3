"""Django's process rule with real processes: the loop starts in a real gunicorn's workers, each
with the ``ONCELY_*`` settings (a port of the ``ONCELY_HTTP`` range each, ``ONCELY_RETENTION``),
and in no program that only sets Django up: a script, ``manage.py shell``/``migrate``/``check``,
a Celery worker (a program named ``celery``: Celery itself is not a dependency)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _processes import Server, free_port, free_ports, http_get, wait_until

_SERVING = re.compile(r"oncely: worker \S+#(\d+) serving")
_LISTENING = re.compile(r"oncely: health and metrics on http://(127\.0\.0\.1:\d+)")
_UNKNOWN_SERVER = "oncely: not starting the loop in this process"
# No proxy from the environment may stand between the test and 127.0.0.1.

_FILES = {
    "manage.py": """
        import os
        import sys

        if __name__ == "__main__":
            os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
            from django.core.management import execute_from_command_line

            execute_from_command_line(sys.argv)
    """,
    "project/__init__.py": "",
    "project/settings.py": """
        import json
        import os
        from pathlib import Path

        SECRET_KEY = "test-only"
        ALLOWED_HOSTS = ["127.0.0.1"]
        ROOT_URLCONF = "project.urls"
        INSTALLED_APPS = ["oncely.integrations.django"]
        DATABASES = {
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(Path(__file__).resolve().parents[1] / "django.db"),
            }
        }
        USE_TZ = True
        ONCELY_APP = "project.jobs:app"
        ONCELY_EMBEDDED = json.loads(os.environ.get("PROJECT_EMBEDDED", "true"))
        ONCELY_CONCURRENCY = json.loads(os.environ.get("PROJECT_CONCURRENCY", "2"))
        ONCELY_HTTP = os.environ.get("PROJECT_HTTP")
        ONCELY_RETENTION = os.environ.get("PROJECT_RETENTION", "30d")
        LOGGING = {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"plain": {"format": "%(process)d %(levelname)s %(message)s"}},
            "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
            "root": {"handlers": ["stderr"], "level": "INFO"},
        }
    """,
    "project/jobs.py": """
        import oncely

        app = oncely.App()  # $ONCELY_DATABASE_URL


        @app.job(oncely.every(seconds=1))
        def heartbeat(run):
            pass
    """,
    "project/urls.py": """
        import os

        from django.http import JsonResponse
        from django.urls import path

        from project.jobs import app


        def worker(request):
            running = app._embedded.worker if app._embedded is not None else None
            if running is None:
                return JsonResponse({"pid": os.getpid(), "worker": None})
            return JsonResponse({
                "pid": os.getpid(),
                "worker": {
                    "http": running.http_address,
                    "retention_s": running.housekeeping.retention.default.total_seconds(),
                    "concurrency": running.concurrency,
                },
            })


        urlpatterns = [path("worker", worker)]
    """,
    "project/wsgi.py": """
        import os

        from django.core.wsgi import get_wsgi_application

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
        application = get_wsgi_application()
    """,
    # A program of the project's own that sets Django up to use its models.
    "report.py": """
        import os

        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
        django.setup()
        print("report done")
    """,
    # A WSGI server oncely does not know: it imports the project's WSGI module, as servers do.
    "homegrown_server.py": """
        from project.wsgi import application

        print("homegrown server loaded", application.__class__.__name__)
    """,
}

# What `celery -A project worker` does as Django starts: the program is named celery and sets
# Django up (the project's celery.py calls django.setup() through Celery's fixups).
_CELERY = """#!{python}
import os
import sys

sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
import django

django.setup()
print("celery worker set up:", " ".join(sys.argv[1:]))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    for name, text in _FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    celery = tmp_path / "bin" / "celery"
    celery.parent.mkdir()
    celery.write_text(_CELERY.format(python=sys.executable))
    celery.chmod(0o755)
    return root


def _env(project: Path, **settings: str) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("PROJECT_")},
        "ONCELY_DATABASE_URL": f"sqlite:///{project / 'oncely.db'}",
        "HOME": str(project),  # gunicorn's control socket: one per test
        "PATH": f"{project.parent / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        **{f"PROJECT_{name.upper()}": value for name, value in settings.items()},
    }


def _run(project: Path, command: list[str], **settings: str) -> str:
    done = subprocess.run(
        command, cwd=project, env=_env(project, **settings),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


PROGRAMS = {
    "a script calling django.setup()": [sys.executable, "report.py"],
    "manage.py shell -c": [sys.executable, "manage.py", "shell", "-c", "print('shell done')"],
    "manage.py migrate": [sys.executable, "manage.py", "migrate"],
    "manage.py check": [sys.executable, "manage.py", "check"],
    "a Celery worker": ["celery", "-A", "project", "worker", "--loglevel", "INFO"],
}


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_programs_that_set_django_up_but_serve_no_requests_start_no_loop_and_say_nothing(
    project: Path, program: str
) -> None:
    output = _run(project, PROGRAMS[program])
    assert "serving" not in output, output
    assert "oncely" not in output, output  # not even a line saying it did not start


def test_a_server_oncely_does_not_know_gets_one_info_line_and_always_starts_it(
    project: Path,
) -> None:
    output = _run(project, [sys.executable, "homegrown_server.py"])
    assert "homegrown server loaded WSGIHandler" in output
    assert "serving" not in output, output
    (line,) = [line for line in output.splitlines() if _UNKNOWN_SERVER in line]
    assert " INFO " in line
    assert 'ONCELY_EMBEDDED = "always"' in line

    output = _run(project, [sys.executable, "homegrown_server.py"], embedded='"always"')
    assert len(_SERVING.findall(output)) == 1, output
    assert _UNKNOWN_SERVER not in output


def test_gunicorn_serving_the_django_app_runs_a_loop_in_each_worker_with_the_settings(
    project: Path,
) -> None:
    """3 workers and a range of 3 ports: each worker's /healthz and /metrics on a port of its
    own (with one port, the second worker's loop failed to listen), each loop keeping the
    ``ONCELY_RETENTION`` given."""
    ports = free_ports(3)
    port = free_port()
    server = Server(
        [
            *(sys.executable, "-m", "gunicorn", "project.wsgi", "--workers", "3"),
            *("--bind", f"127.0.0.1:{port}"),
        ],
        env=_env(project, http=f"127.0.0.1:{ports[0]}-{ports[-1]}", retention="7d"),
        cwd=project,
        log=project / "gunicorn.log",
    )
    try:
        server.start()
        wait_until(lambda: len(set(_SERVING.findall(server.output()))) >= 3, 60, "3 loops")
        wait_until(lambda: len(_LISTENING.findall(server.output())) >= 3, 10, "3 listening")
        listening = _LISTENING.findall(server.output())
        assert sorted(int(a.rpartition(":")[2]) for a in listening) == list(ports)
        for address in listening:
            wait_until(
                lambda a=address: http_get(a, "/healthz")[0] == 200, 20, f"{address}/healthz"
            )
            code, body = http_get(address, "/metrics")
            assert code == 200
            assert b"# TYPE oncely_in_flight gauge" in body
        seen = {}
        for _ in range(20):
            code, body = http_get(f"127.0.0.1:{port}", "/worker")
            assert code == 200, body
            answer = json.loads(body)
            seen[answer["pid"]] = answer["worker"]
        for worker in seen.values():
            assert worker is not None  # every process that answered runs a loop
            assert worker["retention_s"] == 7 * 86400
            assert worker["http"] in listening
            assert worker["concurrency"] == 2
        code, _ = server.terminate(within=40)
        assert code == 0, server.output()
    finally:
        server.kill()
    output = server.output()
    assert server.process is not None
    assert str(server.process.pid) not in _SERVING.findall(output)  # not in the master
    assert _UNKNOWN_SERVER not in output


def test_gunicorn_preloading_the_django_app_starts_no_loop_in_its_master_and_says_so(
    project: Path,
) -> None:
    """``--preload`` sets Django up once, in the master, before the fork: a loop started there
    ran in the master alone, and none in the workers that serve."""
    server = Server(
        [
            *(sys.executable, "-m", "gunicorn", "project.wsgi", "--workers", "2", "--preload"),
            *("--bind", f"127.0.0.1:{free_port()}"),
        ],
        env=_env(project),
        cwd=project,
        log=project / "gunicorn.log",
    )
    try:
        server.start()
        wait_until(lambda: server.output().count("Booting worker") >= 2, 60, "2 workers")
        code, _ = server.terminate(within=40)
        assert code == 0, server.output()
    finally:
        server.kill()
    output = server.output()
    assert "serving" not in output, output
    assert server.process is not None
    (line,) = [line for line in output.splitlines() if "gunicorn's master process" in line]
    assert line.startswith(f"{server.process.pid} INFO "), line
    assert "post_fork" in line


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"embedded": '"sometimes"'},
            "settings.ONCELY_EMBEDDED='sometimes': give True (start the loop in processes that "
            'serve requests), "always" (in every process that sets Django up, manage.py '
            "oncely_run apart) or False (never; run manage.py oncely_run)",
        ),
        (
            {"retention": "30 days"},
            "settings.ONCELY_RETENTION='30 days': give how long to keep history, a timedelta or "
            "a whole number and m, h, d or w (30m, 12h, 7d, 2w), more than 0, and for statuses "
            'kept otherwise STATUS=DURATION after it, as in "30d,failed=90d" (statuses: '
            "succeeded, failed, skipped, abandoned, invalid)",
        ),
    ],
)
def test_a_bad_setting_fails_every_command_naming_the_setting(
    project: Path, settings: dict[str, str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=project, env=_env(project, **settings),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert f"oncely.errors.ConfigurationError: {message}\n" in done.stderr, done.stderr
