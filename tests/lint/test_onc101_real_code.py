"""ONC101 on shapes met in real projects (issue 23): the false alarms are clean, the misses fire.

Each case is written for this file; the corpus (bench/lint_corpus.py) is where the shapes were
seen. Lines ending in ``# fires`` are where the rule must fire, and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oncely.lint import LintConfig, lint_source


def _lines(source: str) -> list[int]:
    config = LintConfig(root=Path("/nonexistent"), select=("ONC101",))
    return [f.line for f in lint_source(Path("m.py"), source, config)]


def _marked(source: str) -> list[int]:
    return [n for n, line in enumerate(source.splitlines(), 1) if line.endswith("# fires")]


FALSE_ALARMS = [
    pytest.param(
        """\
import time

def keep_alive():
    while True:
        try:
            time.sleep(1)
        except KeyboardInterrupt:
            break
""",
        id="keep-alive-sleep-until-keyboard-interrupt",
    ),
    pytest.param(
        """\
import sys
import time

def wait_for_answer(client):
    while True:
        if client.status() == "answered":
            sys.exit(0)
        time.sleep(2)
""",
        id="poll-ends-the-process-with-sys-exit",
    ),
    pytest.param(
        """\
import os
import time

def wait_for_answer(client):
    while True:
        reply = client.status()
        if reply.done:
            os._exit(0)
        time.sleep(2)
""",
        id="poll-ends-the-process-with-os-exit",
    ),
    pytest.param(
        """\
import time

def wait_for_answer(client):
    while True:
        if client.status() == "answered":
            raise SystemExit(0)
        time.sleep(2)
""",
        id="poll-ends-the-process-with-raise-system-exit",
    ),
    pytest.param(
        """\
import queue
import time

def consume(jobs, handle):
    while True:
        try:
            item = jobs.get_nowait()
        except queue.Empty:
            time.sleep(0.5)
            continue
        handle(item)
        time.sleep(0.1)
""",
        id="queue-consumer-cooldown-after-an-item",
    ),
    pytest.param(
        """\
import asyncio

async def consume(self):
    while True:
        if self.inbox.empty():
            await asyncio.sleep(1)
            continue
        message = await self.inbox.get()
        await self.deliver(message)
""",
        id="queue-consumer-sleeps-when-empty",
    ),
    pytest.param(
        """\
import time

def push_updates(self):
    while True:
        self.changed.wait()
        self.changed.clear()
        self.publish()
        time.sleep(max(0.0, self.interval - (time.monotonic() - self.last)))
""",
        id="event-driven-rate-limiter",
    ),
    pytest.param(
        """\
import time

def wait_connected(client, timeout):
    end = time.monotonic() + timeout
    expired = lambda: time.monotonic() > end
    while not expired():
        client.connect()
        time.sleep(1)
""",
        id="deadline-held-in-a-lambda",
    ),
    pytest.param(
        """\
import time

def wait_connected(client, timeout):
    end = time.monotonic() + timeout
    def expired():
        return time.monotonic() > end
    while not expired():
        client.connect()
        time.sleep(1)
""",
        id="deadline-held-in-a-local-function",
    ),
    pytest.param(
        """\
import time

def wait_connected(client, end):
    while True:
        client.connect()
        late = time.monotonic() > end
        if late:
            break
        time.sleep(1)
""",
        id="deadline-held-in-a-variable",
    ),
    pytest.param(
        """\
import os
import time

def wait_for_exit(pid):
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
""",
        id="loop-ends-when-a-call-raises",
    ),
    pytest.param(
        """\
import time

def supervise(self):
    delay = 1
    while True:
        try:
            self.connect()
            self.serve()
            delay = 1
        except ConnectionError:
            self.log.warning("lost the connection")
        time.sleep(delay)
        delay = min(delay * 2, 60)
""",
        id="reconnect-supervisor-with-backoff",
    ),
    pytest.param(
        """\
import time

class Bot:
    def serve_forever(self):
        while True:
            try:
                if self.serve_once():
                    break
            except Exception:
                self.log.exception("lost the server")
            self._back_off()

    def _back_off(self):
        time.sleep(self._delay)
        self._delay *= 2
""",
        id="reconnect-supervisor-backoff-in-a-method",
    ),
    pytest.param(
        """\
import threading
import time

class Throttled:
    def send(self, data):
        delta = self._last + self._rate - time.time()
        if delta > 0:
            self._held = threading.Timer(delta, lambda: self.send(data))
            self._held.start()
            return
        self._last = time.time()
        self._emit(data)
""",
        id="throttle-holds-back-with-a-one-shot-timer",
    ),
    pytest.param(
        """\
import threading

class Debounced:
    def touch(self):
        if self._timer is None:
            self._timer = threading.Timer(0.5, self.touch)
            self._timer.start()
""",
        id="debounce-one-shot-timer-when-none-pending",
    ),
    pytest.param(
        """\
import os
import signal
import time

def stop_daemon(pid):
    try:
        while True:
            os.kill(pid, signal.SIGTERM)
            time.sleep(0.1)
    except OSError:
        pass
""",
        id="signal-until-the-process-is-gone-caught-around-the-loop",
    ),
    pytest.param(
        """\
import time

def heat_up(self, target):
    below = lambda: self.temperature < target
    while not self.killed and below():
        self.simulate_step()
        time.sleep(0.5)
""",
        id="moves-towards-a-bound-held-in-a-lambda",
    ),
    pytest.param(
        """\
from time import sleep

def repl(self):
    while True:
        line = input(">>> ")
        self.handle(line)
        sleep(0.5)
""",
        id="prompt-loop-work-comes-from-input",
    ),
    pytest.param(
        """\
import time

def show_progress(done, console):
    while not done.is_set():
        console.print(".", end="")
        time.sleep(1)
""",
        id="progress-dots-while-something-else-works",
    ),
    pytest.param(
        """\
import time

def wait_for_signal(app):
    while True:
        if not app.signal:
            try:
                time.sleep(1)
            except KeyboardInterrupt:
                app.signal = "shutdown"
        else:
            app.log.info("signal %s", app.signal)
            app.shutdown()
""",
        id="keep-alive-until-a-signal-shuts-the-program-down",
    ),
    pytest.param(
        """\
import time

def show(self):
    leave = False
    while not leave:
        self.update()
        if not self.quiet:
            leave = self.screen.redraw(self.stats, timeout=self.refresh)
        else:
            time.sleep(self.refresh)
""",
        id="display-loop-ends-when-the-screen-says-so",
    ),
]

MISSES = [
    pytest.param(
        """\
import threading

class RepeatedTimer:
    def run(self):
        while not self.finished.wait(self.interval()):  # fires
            self.function()
""",
        id="repeated-timer-whose-wait-is-a-call",
    ),
    pytest.param(
        """\
import asyncio

def repeat_every(seconds, max_repetitions=None):
    def decorator(func):
        async def loop():
            repetitions = 0
            while max_repetitions is None or repetitions < max_repetitions:  # fires
                try:
                    await func()
                    repetitions += 1
                except Exception:
                    pass
                await asyncio.sleep(seconds)
        return loop
    return decorator
""",
        id="optional-cap-that-is-no-cap",
    ),
    pytest.param(
        """\
import time

def sync_forever(sync):
    while True:  # fires
        sync()
        for _ in range(60):
            time.sleep(1)
""",
        id="wait-hidden-in-a-nested-bounded-loop",
    ),
    pytest.param(
        """\
import threading

class Heartbeat:
    def beat(self):
        self.send()
        if not self.stopped:
            self._timer = threading.Timer(30, self.beat)  # fires
            self._timer.start()
""",
        id="re-arming-timer-behind-a-stop-switch-still-fires",
    ),
    pytest.param(
        """\
import time

def sync_forever(sync):
    while True:  # fires
        try:
            sync()
            time.sleep(60)
        except KeyboardInterrupt:
            break
""",
        id="keyboard-interrupt-is-no-end-of-a-loop-that-works",
    ),
    pytest.param(
        """\
import time

def poll(api):
    while True:  # fires
        data = api.get("/status")
        api.store(data)
        time.sleep(30)
""",
        id="a-get-with-an-argument-is-no-queue",
    ),
    pytest.param(
        """\
import time

def sync_forever(sync):
    try:
        while True:  # fires
            sync()
            time.sleep(60)
    except ValueError:
        pass
""",
        id="a-timer-that-dies-on-an-error-still-fires",
    ),
    pytest.param(
        """\
import time

def refresh_forever(self, elapsed):
    while True:  # fires
        self.update()
        time.sleep(self.interval - elapsed.get())
""",
        id="a-get-inside-an-expression-is-no-queue",
    ),
    pytest.param(
        """\
from threading import Timer

class Plugin:
    def arm(self, interval, method):
        timer = Timer(interval=interval, function=self.poll, kwargs={"method": method})  # fires
        timer.start()

    def poll(self, interval, method):
        if method in self.pollers:
            method()
            self.arm(interval, method)
""",
        id="timer-re-armed-through-a-helper",
    ),
]


@pytest.mark.parametrize("source", FALSE_ALARMS)
def test_a_real_code_false_alarm_is_clean(source: str) -> None:
    assert _lines(source) == []


@pytest.mark.parametrize("source", MISSES)
def test_a_real_code_miss_fires(source: str) -> None:
    assert _marked(source)
    assert _lines(source) == _marked(source)
