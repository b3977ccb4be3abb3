"""ONC101, ad-hoc recurring timer: its disguises fire, its look-alikes do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncely.lint import LintConfig, lint_files, lint_source, read_config
from oncely.lint.rules.onc101_recurring_timer_loop import RecurringTimerLoop

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "ONC101.py"
FIX = "schedule it with @app.job(oncely.every(...)) instead"


def _findings(source: str, tmp_path: Path) -> list[tuple[int, str]]:
    config = LintConfig(root=tmp_path, select=("ONC101",))
    return sorted((f.line, f.message) for f in lint_source(Path("m.py"), source, config))


def _lines(source: str, tmp_path: Path) -> list[int]:
    return [line for line, _ in _findings(source, tmp_path)]


def _marked(source: str) -> list[int]:
    """The lines of ``source`` that end in ``# fires``."""
    return [n for n, line in enumerate(source.splitlines(), 1) if line.endswith("# fires")]


def test_the_violating_example_fires_at_its_lines_and_the_clean_one_does_not(
    tmp_path: Path,
) -> None:
    assert _marked(RecurringTimerLoop.violating) == [6, 13]
    assert _lines(RecurringTimerLoop.violating, tmp_path) == [6, 13]
    assert _findings(RecurringTimerLoop.clean, tmp_path) == []


def test_the_fixture_fires_exactly_on_its_marked_lines(tmp_path: Path) -> None:
    source = FIXTURE.read_text()
    assert len(_marked(source)) >= 20
    assert _lines(source, tmp_path) == _marked(source)


def test_the_message_says_what_it_saw_and_what_to_do_instead(tmp_path: Path) -> None:
    source = "from time import sleep as pause\n\nwhile 1:\n    work()\n    pause(60)\n"
    assert _findings(source, tmp_path) == [
        (
            3,
            "ad-hoc recurring timer: `while 1` repeats work and waits on pause() (time.sleep); "
            + FIX,
        )
    ]


DISGUISES = [
    pytest.param(
        """\
import time as t

while True:  # fires
    work()
    t.sleep(60)
""",
        id="aliased-module",
    ),
    pytest.param(
        """\
from time import sleep as pause

def run():
    while True:  # fires
        work()
        pause(60)
""",
        id="from-time-import-sleep-as-pause",
    ),
    pytest.param(
        """\
import time

while 1:  # fires
    work()
    time.sleep(60)
""",
        id="while-1",
    ),
    pytest.param(
        """\
import time

def run(running):
    while running:  # fires
        work()
        time.sleep(5)
""",
        id="flag-never-set-in-the-loop",
    ),
    pytest.param(
        """\
import asyncio

async def run():
    while True:  # fires
        await work()
        await asyncio.sleep(60)
""",
        id="async-def-await-asyncio-sleep",
    ),
    pytest.param(
        """\
import threading

stop = threading.Event()

def run():
    while not stop.wait(60):  # fires
        work()
""",
        id="event-wait-in-the-condition",
    ),
    pytest.param(
        """\
import threading

class Heartbeat:
    def beat(self):
        send()
        self._timer = threading.Timer(30, self.beat)  # fires
        self._timer.daemon = True
        self._timer.start()
""",
        id="re-arming-threading-timer",
    ),
    pytest.param(
        """\
import asyncio

def tick():
    work()
    asyncio.get_running_loop().call_later(60, tick)  # fires
""",
        id="call-later-re-arming",
    ),
    pytest.param(
        """\
import itertools
import time

for _ in itertools.count():  # fires
    work()
    time.sleep(1)
""",
        id="for-in-itertools-count",
    ),
    pytest.param(
        """\
from gevent import sleep

def run(stop):
    while True:  # fires
        if stop.is_set():
            break
        work()
        sleep(60)
""",
        id="stop-switch-then-gevent-sleep",
    ),
    pytest.param(
        """\
import anyio

async def run(stop):
    while not stop.is_set():  # fires
        try:
            await work()
        except Exception:
            log.exception("failed")
        await anyio.sleep(60)
""",
        id="errors-swallowed-anyio-sleep",
    ),
    pytest.param(
        """\
import time

def run():
    def pause():
        time.sleep(60)

    while True:  # fires
        work()
        pause()
""",
        id="sleep-in-a-nested-function-called-in-the-loop",
    ),
    pytest.param(
        """\
import asyncio

async def run(stop):
    while True:  # fires
        try:
            await asyncio.wait_for(stop.wait(), timeout=60)
            return
        except TimeoutError:
            await work()
""",
        id="asyncio-wait-for-event-then-return-is-a-stop",
    ),
    pytest.param(
        """\
import time

class Worker:
    def loop(self):
        drain_until = None
        while True:  # fires
            if self.stopping:
                if drain_until is None:
                    drain_until = time.monotonic() + 30
                if not self.busy() or time.monotonic() >= drain_until:
                    break
            delay = self.cycle()
            self.wake.wait(delay)
""",
        id="deadline-only-behind-a-stop-switch",
    ),
]


@pytest.mark.parametrize("source", DISGUISES)
def test_a_disguised_recurring_timer_fires(source: str, tmp_path: Path) -> None:
    assert _lines(source, tmp_path) == _marked(source) != []


LOOK_ALIKES = [
    pytest.param(
        """\
import time

def fetch_with_retry(fetch):
    for attempt in range(5):
        try:
            return fetch()
        except OSError:
            time.sleep(2**attempt)
    raise RuntimeError("gave up")
""",
        id="retry-with-range",
    ),
    pytest.param(
        """\
import time

def connect_with_retry(connect):
    while True:
        try:
            connection = connect()
            break
        except OSError:
            time.sleep(1)
    return connection
""",
        id="retry-until-success",
    ),
    pytest.param(
        """\
import time

def wait_until_ready(ready, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError("not ready")
        time.sleep(0.1)
""",
        id="deadline-polling",
    ),
    pytest.param(
        """\
import time

def send_all(items, delay):
    for item in items:
        send(item)
        time.sleep(delay)
""",
        id="rate-limiter-over-items",
    ),
    pytest.param(
        """\
import time

time.sleep(5)
start()
""",
        id="one-shot-sleep",
    ),
    pytest.param(
        """\
import time

def eventually(check, timeout=5.0):
    started = time.monotonic()
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() - started > timeout:
                raise
        time.sleep(0.01)
""",
        id="test-helper-with-a-timeout-raising-loop",
    ),
    pytest.param(
        """\
def read_all(sock):
    chunks = []
    while True:
        data = sock.recv(4096)
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)
""",
        id="while-reading-a-socket",
    ),
    pytest.param(
        """\
import time

for _ in range(3):
    ping()
    time.sleep(1)
""",
        id="bounded-for-range-3",
    ),
    pytest.param(
        """\
import time

def consume(queue, pool):
    while True:
        job = queue.get()

        def later(job=job):
            time.sleep(5)
            job.retry()

        pool.submit(later)
""",
        id="sleep-in-a-nested-function-not-called-in-the-loop",
    ),
    pytest.param(
        """\
def consume(queue):
    while queue.get():
        handle()
""",
        id="while-queue-get-consumer",
    ),
    pytest.param(
        """\
import time

def poll(client, job):
    while True:
        status = client.status(job)
        if status == "done":
            return status
        time.sleep(5)
""",
        id="poll-until-a-result",
    ),
    pytest.param(
        """\
import time

try:
    while True:
        time.sleep(1)
except KeyboardInterrupt:
    pass
""",
        id="keep-alive-that-does-no-work",
    ),
    pytest.param(
        """\
import asyncio

async def supervise(tasks):
    while True:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            restart(task)
""",
        id="asyncio-wait-is-not-an-event-wait",
    ),
    pytest.param(
        """\
from . import tasks

async def run_all(running):
    while True:
        done = await tasks.wait(running)
        handle(done)
""",
        id="wait-of-a-relatively-imported-module",
    ),
    pytest.param(
        """\
import time

def send(client):
    attempt = 0
    while attempt < 5:
        try:
            client.send()
        except OSError:
            attempt += 1
        if client.sent:
            break
        time.sleep(2**attempt)
""",
        id="attempt-counter-in-the-condition",
    ),
    pytest.param(
        """\
import time

def for_a_minute():
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        work()
        time.sleep(1)
""",
        id="deadline-in-the-condition",
    ),
    pytest.param(
        """\
import time

def until(deadline):
    while True:
        work()
        if time.time() > deadline:
            break
        time.sleep(1)
""",
        id="deadline-checked-after-the-work",
    ),
    pytest.param(
        """\
import threading

def arm(loop, shutdown):
    threading.Timer(5, shutdown).start()
    loop.call_later(5, shutdown)
""",
        id="timers-that-do-not-re-arm",
    ),
]


@pytest.mark.parametrize("source", LOOK_ALIKES)
def test_a_look_alike_does_not_fire(source: str, tmp_path: Path) -> None:
    assert _findings(source, tmp_path) == []


def test_oncely_waits_on_time_only_in_the_worker_its_loop_and_its_heartbeats() -> None:
    configured = read_config(ROOT / "pyproject.toml")
    in_oncely = [path for path in configured.allow["ONC101"] if path.startswith("src/")]
    worker = ["src/oncely/worker/leases.py", "src/oncely/worker/loop.py"]
    assert in_oncely == worker  # the others are tests' waiting loops
    assert lint_files([ROOT / "src"], configured, ["ONC101"]) == []
    unallowed = LintConfig(root=configured.root)
    found = lint_files([ROOT / "src"], unallowed, ["ONC101"])
    assert sorted((f.path, f.code) for f in found) == [(path, "ONC101") for path in worker]


@pytest.mark.parametrize(
    "source",
    [
        "import time\nwhile True:\n    work()\n    time.sleep(1)\n",
        "from time import sleep as pause\nwhile True:\n    work()\n    pause(1)\n",
        "import trio\nwhile True:\n    work()\n    trio.sleep_until(t)\n",
        "while True:\n    work()\n    stop.wait(5)\n",
        "import asyncio\nasync def f(stop):\n    while True:\n        work()\n"
        "        await asyncio.wait_for(stop.wait(), 5)\n",
        "import threading\ndef beat():\n    threading.Timer(5, beat).start()\n",
        "from threading import Timer as T\ndef beat():\n    T(5, beat).start()\n",
        "def tick(loop):\n    loop.call_later(5, tick, loop)\n",
        "def tock(loop):\n    loop.call_at(loop.time() + 5, tock, loop)\n",
        # Not ASCII: the parser reads the full-width name as time.sleep, a trigger it lacks.
        "import time\nwhile True:\n    work()\n    time.\uff53\uff4c\uff45\uff45\uff50(1)\n",
    ],
    ids=[
        "sleep",
        "sleep-imported-as",
        "sleep_until",
        "wait",
        "wait_for",
        "Timer",
        "Timer-imported-as",
        "call_later",
        "call_at",
        "full-width-sleep",
    ],
)
def test_a_file_with_one_trigger_is_checked(source: str, tmp_path: Path) -> None:
    """The rule skips files without its triggers: each way it fires keeps one in the text."""
    present = [t for t in RecurringTimerLoop.triggers if t in source]
    assert len(present) <= 1 or present == ["wait"]  # each case stands on one trigger
    assert len(_findings(source, tmp_path)) == 1
