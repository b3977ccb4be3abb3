"""The gunicorn and Django examples as real servers: one loop in each worker process (none in
gunicorn's master, even preloaded; none in Django's other management commands), drained when the
server stops; and ``manage.py oncely_run`` as a worker process of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import oncely
from _processes import Server, free_port, http_get, json_lines, terminate, wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_SERVING = re.compile(r"oncely: worker \S+#(\d+) serving")
_STOPPED = re.compile(r"oncely: worker \S+#(\d+) stopped")
# No proxy from the environment may stand between the test and 127.0.0.1.


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ONCELY_DATABASE_URL": f"sqlite:///{tmp_path / 'oncely.db'}",
        # gunicorn keeps a control socket under $HOME; two servers at once must not share one.
        "HOME": str(tmp_path),
    }


def _ran(tmp_path: Path, at_least: int) -> bool:
    app = oncely.App(f"sqlite:///{tmp_path / 'oncely.db'}")
    try:
        return len(app.history("heartbeat", status="succeeded")) >= at_least
    except oncely.OncelyError:
        return False  # not created yet
    finally:
        app.close()


def _serve_and_stop(server: Server, tmp_path: Path, workers: int) -> tuple[set[str], str]:
    """Start ``server``, wait for a loop in each worker and two runs, stop it; the pids that
    served, and its output."""
    try:
        server.start()
        wait_until(lambda: len(set(_SERVING.findall(server.output()))) >= workers, 60, "every loop")
        wait_until(lambda: _ran(tmp_path, 2), 20, "the job to run")
        code, took = server.terminate(within=40)
        output = server.output()
        print(f"{server.command[3:5]}: stopped with exit {code} after {took:.2f} s")
        assert code == 0, output
    finally:
        server.kill()
    serving = set(_SERVING.findall(output))
    assert len(serving) == workers, output
    assert set(_STOPPED.findall(output)) == serving, output  # each drained as it exited
    return serving, output


def test_gunicorn_hooks_run_one_loop_per_worker_of_a_preloaded_app(tmp_path: Path) -> None:
    server = Server(
        [
            *(sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"),
            *("--bind", f"127.0.0.1:{free_port()}", "--workers", "2"),
        ],
        env=_env(tmp_path),
        cwd=EXAMPLES / "gunicorn_app",
        log=tmp_path / "gunicorn.log",
    )
    serving, _ = _serve_and_stop(server, tmp_path, workers=2)
    assert server.process is not None
    assert str(server.process.pid) not in serving  # the master imported the app, ran no loop


def test_django_runs_one_loop_per_server_process_and_none_in_other_commands(
    tmp_path: Path,
) -> None:
    project = EXAMPLES / "django_app"
    server = Server(
        [
            *(sys.executable, "-m", "gunicorn", "project.wsgi"),
            *("--bind", f"127.0.0.1:{free_port()}", "--workers", "2"),
        ],
        env=_env(tmp_path),
        cwd=project,
        log=tmp_path / "django.log",
    )
    _serve_and_stop(server, tmp_path, workers=2)
    check = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=project,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert check.returncode == 0, check.stderr
    assert "serving" not in check.stdout + check.stderr


def _seed_history(tmp_path: Path, ages: dict[str, timedelta]) -> None:
    """One finished run of the heartbeat job per key, ``ages[key]`` ago."""
    now = datetime.now(UTC)
    for key, age in ages.items():
        then = now - age
        past = oncely.App(f"sqlite:///{tmp_path / 'oncely.db'}", clock=lambda then=then: then)
        past.job(name="heartbeat")(lambda run: None)
        past.defer("heartbeat", at=then, key=key)
        past.tick()
        past.close()


def _keys(tmp_path: Path) -> set[str]:
    app = oncely.App(f"sqlite:///{tmp_path / 'oncely.db'}")
    try:
        return {o.key for o in app.history(limit=1000) if o.key in {"old", "recent"}}
    finally:
        app.close()


def test_django_oncely_run_is_a_worker_process_of_its_own_with_oncely_runs_options(
    tmp_path: Path,
) -> None:
    _seed_history(tmp_path, {"old": timedelta(days=8), "recent": timedelta(days=6)})
    address = f"127.0.0.1:{free_port()}"
    log = tmp_path / "oncely_run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                *(sys.executable, "manage.py", "oncely_run", "--drain-timeout", "5"),
                *("--retention", "7d", "--http", address, "--log-format", "json"),
            ],
            cwd=EXAMPLES / "django_app",
            env=_env(tmp_path),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: _ran(tmp_path, 2), 30, "oncely_run to run the job")
        wait_until(lambda: http_get(address, "/healthz")[0] == 200, 10, "/healthz to answer 200")
        code, metrics = http_get(address, "/metrics")
        assert code == 200
        assert b'oncely_occurrences_total{job="heartbeat",status="succeeded"}' in metrics
        wait_until(lambda: _keys(tmp_path) == {"recent"}, 20, "the 8-day-old run to be pruned")
        code, _ = terminate(process, within=15)
        output = log.read_text()
        assert code == 0, output
    finally:
        process.kill()
        process.wait()
    messages = [line["message"] for line in json_lines(output)]
    assert len([m for m in messages if _SERVING.match(m)]) == 1, output
    assert any(m.startswith("oncely: SIGTERM: no new claims") for m in messages), output
    assert f"oncely: health and metrics on http://{address}" in messages, output
