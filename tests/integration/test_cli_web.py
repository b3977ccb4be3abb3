"""`oncely web MODULE:APP` in a real process: it serves the dashboard on loopback, read-only."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_oncely_web_serves_the_dashboard_read_only(tmp_path: Path, sqlite_url: str) -> None:
    (tmp_path / "tasks_served.py").write_text(
        "import oncely\n"
        f"app = oncely.App({sqlite_url!r})\n"
        "@app.job(oncely.every(minutes=5))\n"
        "def beat(run):\n    pass\n"
    )
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "oncely.cli", "web", "tasks_served:app", "--http",
         f"127.0.0.1:{port}"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/drift", timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.1)
        body = page.read().decode()
        assert page.status == 200
        assert "beat" in body  # declared, and no worker has saved its schedule yet
        assert "read-only" in body
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert f"oncely dashboard on http://127.0.0.1:{port}/ (read-only)" in out, err
