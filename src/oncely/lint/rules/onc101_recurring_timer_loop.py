"""ONC101: work repeated on a timer of the code's own making, a second scheduler."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oncely.lint.rules import _paths as paths
from oncely.lint.rules.base import Context, Rule

_FIX = "schedule it with @app.job(oncely.every(...)) instead"
_SLEEPS = frozenset(
    {
        "time.sleep",
        "asyncio.sleep",
        "trio.sleep",
        "trio.sleep_until",
        "anyio.sleep",
        "anyio.sleep_until",
        "gevent.sleep",
    }
)
# The last name of a call that reads a clock: time.monotonic(), loop.time(), datetime.now(),
# trio.current_time(), an injected self.clock().
_CLOCKS = frozenset(
    {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns"}
    | {"now", "utcnow", "current_time", "clock"}
)
_CALLBACK_TIMERS = frozenset({"call_later", "call_at"})
# Methods by which a body drains or fills what its `while` condition tests, and by which it
# re-reads an object whose attributes the condition tests: progress towards an end.
_CHANGES = frozenset(
    {"pop", "popleft", "popitem", "remove", "discard", "get", "get_nowait", "recv", "read"}
    | {"readline", "append", "appendleft", "add", "extend", "update", "put", "put_nowait"}
)
_REFRESHES = frozenset({"reload", "refresh", "refresh_from_db"})
# Logging and console output (progress dots while something else works) are not work.
_LOGS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "print"}
)
_ARITHMETIC = frozenset({"min", "max", "abs", "float", "int", "round"})
# Exceptions that stop a loop from outside (a signal, a cancelled task) or any failure at all:
# leaving on one is a stop switch or giving up, not the end the loop waited for.
_STOPS = frozenset(
    {"Exception", "BaseException", "KeyboardInterrupt", "SystemExit", "GeneratorExit"}
    | {"CancelledError"}
)
# What a probe of a process or a file raises once it is gone: `os.kill(pid, ...)` until it does.
_PROCESS_GONE = frozenset(
    {"OSError", "ProcessLookupError", "ChildProcessError", "FileNotFoundError"}
)
# Callees whose result, as a wait's timeout, is a duration: `stop.wait(self.interval())`.
_DURATION_WORDS = ("interval", "timeout", "delay", "period", "second", "wait", "remaining")
_EXITS = (ast.Break, ast.Return, ast.Raise)
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)

_Function = ast.FunctionDef | ast.AsyncFunctionDef


class RecurringTimerLoop(Rule):
    """## What it does
    Finds work repeated on a timer of the code's own making:

    - a loop that waits on time and repeats work: ``while True:`` (``while 1:``, ``while
      running:``, ``for _ in itertools.count():``) whose body sleeps or waits with a timeout, or
      ``while not stop.wait(60):``, the wait being the loop's condition;
    - a ``threading.Timer`` created and started inside the function it calls back (it re-arms
      itself), or inside a function of the file that the callback calls (``poll()`` calls
      ``arm()``, which starts a Timer of ``poll``), and ``loop.call_later(delay, f)`` /
      ``loop.call_at(when, f)`` inside ``f`` or such a function;
      not one created under an ``if`` on the time or on the timer itself (``if delta > 0:``,
      ``if self._timer is None:``): a throttle's or a debounce's one-shot hold-back.

    *Waits on time*: ``sleep`` of time, asyncio, trio, anyio or gevent (and ``sleep_until`` of
    trio and anyio) however imported (``import time as t``, ``from time import sleep as
    pause``), except ``sleep(0)``, which only yields; ``x.wait(t)`` or ``x.wait(timeout=t)``
    whose one argument is a duration that is not None (``Event().wait(60)``,
    ``stop.wait(timeout=5)``, ``finished.wait(self.interval())``: a call of no arguments named
    for a duration; not a module's ``asyncio.wait(fs)`` nor ``conn.wait(gen, timeout=5)``,
    which wait for I/O); ``asyncio.wait_for(event.wait(), timeout)``; a call of a function of
    this file that always waits (on its path when nothing raises); and a nested loop that only
    waits (``for _ in range(60): time.sleep(1)``). Otherwise a wait belongs to the innermost
    loop around it; one in a nested function, lambda or class belongs to no loop around it,
    and one in an ``except`` block is backoff after a failure.

    The *path* of an iteration is what it runs when nothing raises: the body and the ``try``,
    ``else``, ``finally`` and ``with`` blocks in it, not what is under an ``if`` or ``except``.
    A loop that waits on time is left alone when one of these holds:

    - it is a ``for`` over anything but an endless iterator (``itertools.count()``, ``cycle()``,
      ``repeat(x)`` without a count): retries over ``range(n)`` and rate limiters over work items
      end when their iterable does;
    - its ``while`` condition caps it: an ordering comparison (a deadline, ``time.monotonic()
      < deadline``; a counter, ``attempt < 5``; a value moving towards a bound), directly or
      through a lambda or local function that returns one (``while not expired():``), an
      equality test of a counter the loop steps with ``+=`` or ``-=``, or a value bound in the
      condition (``while (item := next_item()):``); or the condition reads what the body
      changes: a name assigned on the path (``while not done: done = check()``), or anywhere in
      the body from a call (``leave = self.screen.redraw(...)`` under an ``if``), or an object
      drained, filled or refreshed (``.pop()``, ``.get()``, ``.add()``, ``.reload()``...). A
      counter stepped in the body is no cap when the condition lets it off (``while limit is
      None or count < limit``);
    - its work comes from elsewhere: its path takes from a queue (``item = q.get()``, ``q.get(
      timeout=1)``, ``q.get_nowait()``, as a statement or an assigned value), waits for an event
      with no timeout (``changed.wait()``) or prompts (``input()``); the time it waits is a
      cooldown after the work, not a period;
    - it is a reconnect supervisor: each of its waits is a backoff, a duration the loop (or
      the function that sleeps for it) multiplies (``delay = min(delay * 2, 60)``);
    - it ends after success: its path reaches a ``break``, ``return`` or ``raise`` or ends the
      process (``sys.exit()``, ``os._exit()``, ``exit()``, the program's ``.shutdown()``),
      either unconditionally or under ``if`` tests that each cap the loop (``if
      time.monotonic() > deadline: raise``, ``if attempt >= 5:``) or read a value bound on the
      path (``resp = fetch()`` ... ``if resp.ok: return resp``); or an ``except`` of a named
      error leaves it (``os.kill(pid, 0)`` until ``ProcessLookupError``; not ``Exception``,
      ``KeyboardInterrupt`` or ``CancelledError``, which are failures and stop signals); or it
      repeats one call inside a ``try`` whose ``except OSError`` (``ProcessLookupError``,
      ``ChildProcessError``, ``FileNotFoundError``) is around the loop;
    - it does no work: its body only waits, logs or prints, does arithmetic and checks, and a
      branch that leaves the loop does its work once (``if ready(): claim(); break``); a
      ``try`` counts when its ``except`` blocks also do no work or leave
      (``try: time.sleep(1)`` ``except KeyboardInterrupt: break``).

    What is not an end: an ``if`` reading neither a cap nor a value of the path (``if
    stop.is_set(): break``, ``if self._stopping:``), and whatever follows an
    ``asyncio.wait_for(stop.wait(), ...)`` that returned (the stop came). Those are stop
    switches: the loop repeats its work until someone flips one, and is reported.

    ## Why is this bad?
    Every copy of the app runs the loop, so with two instances (a rolling deploy is enough) the
    work runs twice. It keeps no record: a crash or a deploy silently skips turns and nobody can
    answer "did last Tuesday's run happen?". It is a second scheduler that nobody designed.

    ## Example
    ```python
    def sync_forever():
        while True:
            sync_invoices()
            time.sleep(3600)
    ```

    ## Use instead
    ```python
    @app.job(oncely.every(hours=1))
    def sync(run: oncely.Run) -> None:
        sync_invoices()
    ```
    """

    code = "ONC101"
    name = "recurring-timer-loop"
    message = "ad-hoc recurring timer"
    # Every finding names one, in the file: a loop waits on a sleep, sleep_until, wait or
    # wait_for (directly, or through a function of the file that does); a timer is a Timer
    # (imported or reached as an attribute under that name), a call_later or a call_at.
    triggers = ("sleep", "wait", "Timer", "call_later", "call_at")
    violating = """\
import threading
import time


def sync_forever(sync_invoices):
    while True:  # fires
        sync_invoices()
        time.sleep(3600)


def heartbeat(send):
    send()
    threading.Timer(30, heartbeat, args=(send,)).start()  # fires
"""
    clean = """\
import time


def fetch_with_retry(fetch):
    for attempt in range(5):
        try:
            return fetch()
        except OSError:
            time.sleep(2**attempt)
    raise RuntimeError("gave up after 5 attempts")


def wait_until_ready(ready, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError("not ready")
        time.sleep(0.1)
"""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        self._context: Context | None = None
        self._file: _File | None = None

    def visit_While(self, node: ast.While, context: Context) -> None:
        self._check_loop(node, context)

    def visit_For(self, node: ast.For, context: Context) -> None:
        self._check_loop(node, context)

    def visit_Call(self, node: ast.Call, context: Context) -> None:
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        timer = called not in _CALLBACK_TIMERS
        callback = paths.argument(node, 1, "function" if timer else "callback")
        # Cheapest tests first: most calls are neither a Timer nor call_later/call_at.
        if callback is None or (timer and self._read(context).dotted(func) != "threading.Timer"):
            return
        function = _enclosing_function(node, context)
        if function is None:
            return
        # The callback is the function itself, or one that calls it back (errbot's poller():
        # program_next_poll() arms a Timer of poller(), which calls program_next_poll()).
        called_back = function if _refers(callback, function) else None
        if called_back is None:
            called_back = next(
                (f for f in self._read(context).local(callback) if _calls(f, function)), None
            )
        if called_back is None:
            return
        if timer and not _started(node, function, context):
            return
        if _held_back(node, function, context, self._read(context)):
            return
        how = "threading.Timer" if timer else paths.short(ast.unparse(func))
        where = (
            "from inside it"
            if called_back is function
            else f"through {function.name}(), which it calls"
        )
        self.report(context, node, f"{how} re-arms {called_back.name}() {where}; {_FIX}")

    def _read(self, context: Context) -> _File:
        """The file's imports and functions, read once per file on first need."""
        if self._file is None or self._context is not context:
            self._file = _File.read(context.tree or ast.Module(body=[], type_ignores=[]))
            self._context = context
        return self._file

    def _check_loop(self, loop: ast.While | ast.For, context: Context) -> None:
        if isinstance(loop, ast.For) and not isinstance(loop.iter, ast.Call):
            return  # only a call makes an endless iterator: count(), cycle(), repeat(x)
        file = self._read(context)
        if isinstance(loop, ast.For):
            if not file.endless(loop.iter):
                return
            head = f"for {ast.unparse(loop.target)} in {ast.unparse(loop.iter)}"
            test_calls: list[ast.Call] = []
        else:
            if isinstance(loop.test, ast.Constant) and not loop.test.value:
                return
            head = f"while {ast.unparse(loop.test)}"
            test_calls = [n for n in ast.walk(loop.test) if isinstance(n, ast.Call)]
        own = sorted(
            (
                n
                for n in paths.own(loop.body, into_handlers=False)
                if isinstance(n, ast.Call) or (isinstance(n, paths.LOOPS) and n is not loop)
            ),
            key=lambda n: (n.lineno, n.col_offset),
        )
        waiting = [
            (node, how)
            for node in [*test_calls, *own]
            if (how := file.wait(node) if isinstance(node, ast.Call) else _pause(node, file))
        ]
        if not waiting:
            return
        # Work that comes from a queue or an event, paced after it arrives: not a clock's.
        inner = list(paths.own(loop.body, into_loops=True, into_handlers=False))
        if any(_takes(call, file) for call in paths.statement_calls(inner)):
            return
        facts = _Facts.of(loop, file)
        # Backoff between reconnects: the wait grows, there is no period of the clock's.
        if all(_backoff(node, facts.grown, file) for node, _ in waiting):
            return
        if isinstance(loop, ast.While) and self._capped(loop, facts, file, context):
            return
        if _idle(loop.body, file) or _ends(loop.body, facts, file):
            return
        if _probe_until_raised(loop, context, file):
            return
        waits = [how for _, how in waiting]
        detail = f"`{paths.short(head)}` repeats work and waits on {waits[0]}; {_FIX}"
        self.report(context, loop, detail)

    @staticmethod
    def _capped(loop: ast.While, facts: _Facts, file: _File, context: Context) -> bool:
        """Whether the condition caps the loop or tracks what the body consumes or produces."""
        if _caps(loop.test, True, facts, file):
            return True
        called = {
            call.func.id
            for call in ast.walk(loop.test)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
        }
        if called & _bounds(loop, context, file):
            return True
        for node in paths.own(loop.body, into_loops=True, into_handlers=False):
            # `leave = self.screen.redraw(...)` in a branch: the loop ends when the call says so.
            if (
                isinstance(node, ast.Assign)
                and _answer(node.value)
                and any(key in facts.subjects for t in node.targets for key in paths.assigned(t))
            ):
                return True
        for node in ast.walk(loop.test):
            if isinstance(node, ast.NamedExpr) and not (
                isinstance(node.value, ast.Call) and file.wait(node.value)
            ):
                return True
        for node in paths.own(loop.body, into_loops=True):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                receiver, method = paths.chain_of(node.func.value), node.func.attr
                if method in _CHANGES and receiver in facts.subjects:
                    return True
                if method in _REFRESHES and receiver and paths.rooted_in(facts.subjects, receiver):
                    return True
            elif isinstance(node, ast.Delete):
                deleted = (t.value for t in node.targets if isinstance(t, ast.Subscript))
                if any(paths.chain_of(value) in facts.subjects for value in deleted):
                    return True
        return False


@dataclass
class _File:
    """What ONC101 needs from the whole file: its imports and functions, from its statements."""

    imports: dict[str, str] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)
    functions: dict[str, list[_Function]] = field(default_factory=dict)
    methods: dict[str, list[_Function]] = field(default_factory=dict)
    sleeping: set[_Function] | None = None

    @classmethod
    def read(cls, tree: ast.AST) -> _File:
        found = cls()
        stack: list[tuple[ast.AST, bool]] = [(tree, False)]
        while stack:
            node, in_class = stack.pop()
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    found.imports[bound] = alias.name if alias.asname else bound
                    found.modules.add(bound)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    found.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.ImportFrom) and not node.module:
                found.modules.update(alias.asname or alias.name for alias in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kind = found.methods if in_class else found.functions
                kind.setdefault(node.name, []).append(node)
            # Statements only: imports and definitions are never inside expressions.
            for name in ("body", "orelse", "handlers", "finalbody", "cases"):
                children = getattr(node, name, [])
                if isinstance(children, list):
                    stack.extend((child, isinstance(node, ast.ClassDef)) for child in children)
        return found

    def dotted(self, node: ast.AST) -> str | None:
        """What a name or attribute chain names, through the imports: ``t.sleep``, time.sleep."""
        if isinstance(node, ast.Name):
            return self.imports.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def wait(self, call: ast.Call, sleeping: set[_Function] | None = None) -> str | None:
        """How ``call`` waits on time, as the report says it; None when it does not."""
        func = call.func
        named = self.dotted(func)
        if named in _SLEEPS:
            given = paths.argument(call, 0, "seconds")
            if isinstance(given, ast.Constant) and given.value == 0:
                return None  # sleep(0) yields to other threads or tasks, it waits on no time
            spelled = ast.unparse(func)
            return f"{spelled}()" if spelled == named else f"{spelled}() ({named})"
        if self.signalled(call) or self.times_out(call):
            return paths.short(ast.unparse(call))
        local = self.local(func)
        if local:
            sleepers = self.sleepers() if sleeping is None else sleeping
            if any(function in sleepers for function in local):
                return f"{ast.unparse(func)}(), which sleeps"
        return None

    def signalled(self, call: ast.Call) -> bool:
        """Whether ``call`` is ``x.wait(timeout)``, its one argument a duration that is not None
        (not a module's ``asyncio.wait(fs)``, nor ``conn.wait(gen, timeout=...)`` for I/O)."""
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr != "wait":
            return False
        if self.is_module(func.value) or len(call.args) + len(call.keywords) != 1:
            return False
        given = paths.timeout(call, 0)
        if given is None or (isinstance(given, ast.Constant) and not paths.number(given.value)):
            return False
        return all(
            self.is_clock(sub) or _arithmetic_call(sub) or _duration_getter(sub)
            for sub in ast.walk(given)
            if isinstance(sub, ast.Call)
        )

    def times_out(self, call: ast.Call) -> bool:
        """Whether ``call`` is ``asyncio.wait_for(event.wait(), timeout)``: it raises on timeout,
        so returning from it means the event was set."""
        return (
            self.dotted(call.func) == "asyncio.wait_for"
            and paths.timeout(call, 1) is not None
            and _waits(paths.argument(call, 0, "fut"))
        )

    def sleepers(self) -> set[_Function]:
        """The file's functions that always wait on time: on the path a call takes when
        nothing raises, not under an ``if`` or in a loop of their own; directly or not."""
        if self.sleeping is None:
            every = [
                f for group in [*self.functions.values(), *self.methods.values()] for f in group
            ]
            found: set[_Function] = set()
            grew = True
            while grew:
                grew = False
                for function in every:
                    if function not in found and any(
                        isinstance(node, ast.Call) and self.wait(node, found)
                        for node in paths.path_calls(function.body)
                    ):
                        found.add(function)
                        grew = True
            self.sleeping = found
        return self.sleeping

    def endless(self, node: ast.expr) -> bool:
        """Whether ``node`` is an iterator that never ends: itertools count, cycle, repeat(x)."""
        if not isinstance(node, ast.Call):
            return False
        named = self.dotted(node.func)
        if named in ("itertools.count", "itertools.cycle"):
            return True
        return named == "itertools.repeat" and len(node.args) == 1 and not node.keywords

    def reads_clock(self, node: ast.AST, clocks: set[str]) -> bool:
        """Whether ``node`` reads a clock, by a call or through a name in ``clocks``."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and self.is_clock(sub):
                return True
            if isinstance(sub, ast.Name | ast.Attribute) and paths.chain_of(sub) in clocks:
                return True
        return False

    def is_clock(self, call: ast.Call) -> bool:
        func = call.func
        last = func.attr if isinstance(func, ast.Attribute) else self.dotted(func) or ""
        return last.rsplit(".", 1)[-1] in _CLOCKS

    def is_module(self, node: ast.expr) -> bool:
        key = paths.chain_of(node)
        return key is not None and key.split(".")[0] in self.modules

    def local(self, func: ast.expr) -> list[_Function]:
        if isinstance(func, ast.Name) and func.id not in self.imports:
            return self.functions.get(func.id, [])
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls")
        ):
            return self.methods.get(func.attr, [])
        return []


@dataclass
class _Facts:
    """What one loop's body does that decides whether the loop is capped or ends."""

    stepped: set[str]  # counters: chains the loop steps with += / -=
    clocks: set[str]  # chains the loop assigns a clock reading to
    produced: set[str]  # chains bound on the path an iteration takes when nothing raises
    subjects: set[str]  # chains the while condition reads
    grown: set[str] = field(default_factory=set)  # chains the loop multiplies: backoff delays

    @classmethod
    def of(cls, loop: ast.While | ast.For, file: _File) -> _Facts:
        stepped: set[str] = set()
        clocks: set[str] = set()
        for node in paths.own(loop.body, into_loops=True):
            if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub):
                stepped.update(paths.assigned(node.target))
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                chains = {key for target in targets for key in paths.assigned(target)}
                if file.reads_clock(node.value, set()):
                    clocks.update(chains)
                value = node.value
                if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add | ast.Sub):
                    stepped.update(chains & {paths.chain_of(value.left)})
            elif isinstance(node, ast.NamedExpr) and file.reads_clock(node.value, set()):
                clocks.add(node.target.id)
        if isinstance(loop, ast.For):
            stepped.update(paths.assigned(loop.target))
            subjects: set[str] = set()
        else:
            subjects = set(paths.chains(loop.test))
        produced = {key for stmt in paths.straight(loop.body) for key in paths.bound(stmt)}
        produced.update(n.target.id for n in paths.own(loop.body) if isinstance(n, ast.NamedExpr))
        return cls(stepped, clocks, produced, subjects, _grown(loop.body))


def _caps(test: ast.expr, going_on: bool, facts: _Facts, file: _File) -> bool:
    """Whether ``test`` caps the loop, the loop going on while it holds (``going_on``) or
    leaving once it holds: through a deadline or a counter."""
    if isinstance(test, ast.BoolOp):
        parts = [_caps(value, going_on, facts, file) for value in test.values]
        # Going on while a and b: either cap will do; leaving once a and b: both must cap.
        return all(parts) if isinstance(test.op, ast.Or) == going_on else any(parts)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _caps(test.operand, not going_on, facts, file)
    if isinstance(test, ast.Compare):
        # An ordering comparison is a bound: a deadline (`time.monotonic() < end`), a counter
        # (`attempt < 5`) or a value the loop moves towards (`self.temp < target`).
        if any(isinstance(op, _ORDERING) for op in test.ops):
            return True
        if not any(isinstance(op, (*_ORDERING, ast.Eq, ast.NotEq)) for op in test.ops):
            return False
    return any(chain in facts.stepped for chain in paths.chains(test))


def _ends(body: list[ast.stmt], facts: _Facts, file: _File) -> bool:
    """Whether an iteration that raises nothing leaves the loop at an end (see the rule)."""
    for stmt in body:
        if _exits(stmt):
            return True
        # A counter the loop steps caps it only if the condition says so (`_caps`): in `while
        # limit is None or count < limit` it does not.
        if any(
            paths.rooted(subject, paths.bound(stmt) - facts.stepped) for subject in facts.subjects
        ):
            return True  # the condition's flag, assigned on this path
        if not isinstance(stmt, ast.If | ast.Try | ast.TryStar | ast.With | ast.AsyncWith) and any(
            isinstance(node, ast.Call) and file.times_out(node) for node in paths.own([stmt])
        ):
            return False  # past a wait that returned: the signal came, a stop and not an end
        if isinstance(stmt, ast.If):
            if _ends_on(stmt.test, facts, file) and (
                _ends(stmt.body, facts, file) or _ends(stmt.orelse, facts, file)
            ):
                return True
        elif isinstance(stmt, ast.Try | ast.TryStar):
            if _ends([*stmt.body, *stmt.orelse, *stmt.finalbody], facts, file):
                return True
            # `os.kill(pid, 0)` until ProcessLookupError: the awaited end comes as an exception.
            if any(_awaited(handler.type) and _leaves(handler.body) for handler in stmt.handlers):
                return True
        elif isinstance(stmt, ast.With | ast.AsyncWith) and _ends(stmt.body, facts, file):
            return True
    return False


def _ends_on(test: ast.expr, facts: _Facts, file: _File) -> bool:
    """Whether leaving under ``if test`` is an end (a cap, or a result) and not a stop switch."""
    if _caps(test, False, facts, file):
        return True
    if any(isinstance(node, ast.NamedExpr) for node in ast.walk(test)):
        return True
    return any(paths.rooted(chain, facts.produced) for chain in paths.chains(test))


def _idle(body: list[ast.stmt], file: _File) -> bool:
    """Whether ``body`` does no work: waits, logs, arithmetic, and checks that may leave."""
    for stmt in body:
        if isinstance(stmt, ast.Pass | ast.Continue) or _exits(stmt):
            continue
        if isinstance(stmt, paths.LOOPS) and _pause(stmt, file):
            continue
        if isinstance(stmt, ast.Try | ast.TryStar):
            if _idle([*stmt.body, *stmt.orelse, *stmt.finalbody], file) and all(
                _idle(handler.body, file) or _leaves(handler.body) for handler in stmt.handlers
            ):
                continue
            return False
        if isinstance(stmt, ast.Expr):
            value = stmt.value.value if isinstance(stmt.value, ast.Await) else stmt.value
            if isinstance(value, ast.Constant):
                continue
            if isinstance(value, ast.Call) and (file.wait(value) or _logs(value)):
                continue
            return False
        if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign):
            if stmt.value is None or _arithmetic(stmt.value, file):
                continue
            return False
        if isinstance(stmt, ast.With | ast.AsyncWith) and _idle(stmt.body, file):
            continue
        if not isinstance(stmt, ast.If):
            return False
        # A branch that leaves the loop runs once, so its work is not repeated.
        if not all(_idle(branch, file) or _leaves(branch) for branch in (stmt.body, stmt.orelse)):
            return False
        # `if not sync(): sleep(60)` runs sync() every turn; `if ready(): break` only checks.
        exits = any(
            isinstance(n, ast.stmt) and _exits(n) for n in paths.own([*stmt.body, *stmt.orelse])
        )
        if not exits and not _arithmetic(stmt.test, file):
            return False
    return True


def _leaves(body: list[ast.stmt]) -> bool:
    """Whether ``body`` leaves the loop on the path it takes when nothing raises."""
    return any(_exits(stmt) for stmt in paths.straight(body))


def _exits(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` leaves the loop: ``break``, ``return``, ``raise``, or ends the process
    (``sys.exit()``, ``os._exit()``, ``exit()``)."""
    if isinstance(stmt, _EXITS):
        return True
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return False
    func = stmt.value.func
    if isinstance(func, ast.Attribute):
        if func.attr == "shutdown":  # the program's own shutdown: `plexpy.shutdown()`
            return True
        return isinstance(func.value, ast.Name) and (func.value.id, func.attr) in {
            ("sys", "exit"),
            ("os", "_exit"),
            ("os", "abort"),
        }
    return isinstance(func, ast.Name) and func.id in ("exit", "quit", "_exit")


def _awaited(caught: ast.expr | None) -> bool:
    """Whether an ``except`` of ``caught`` is an end the loop waits for: a named error, not a
    stop signal nor any failure (`_STOPS`)."""
    if caught is None:
        return False
    if isinstance(caught, ast.Tuple):
        return bool(caught.elts) and all(_awaited(element) for element in caught.elts)
    name = caught.attr if isinstance(caught, ast.Attribute) else getattr(caught, "id", None)
    return name is not None and name not in _STOPS


def _pause(loop: ast.AST, file: _File) -> str | None:
    """How a nested loop that only waits (``for _ in range(60): time.sleep(1)``, ``while
    time.monotonic() < end: ...``) waits, as the report says it; None for any other loop."""
    if isinstance(loop, ast.For):
        bounded = (
            isinstance(loop.iter, ast.Call)
            and isinstance(loop.iter.func, ast.Name)
            and loop.iter.func.id == "range"
            and _arithmetic(loop.iter, file, allow={"range"})
        )
        head = f"for ... in {ast.unparse(loop.iter)}"
    elif isinstance(loop, ast.While):
        bounded = _arithmetic(loop.test, file)
        head = f"while {ast.unparse(loop.test)}"
    else:
        return None
    if not bounded or not _idle(loop.body, file):
        return None
    inner = next(
        (how for n in paths.own(loop.body) if isinstance(n, ast.Call) and (how := file.wait(n))),
        None,
    )
    return None if inner is None else f"{inner} in `{paths.short(head, 32)}`"


def _answer(value: ast.expr) -> bool:
    """Whether ``value`` is what a call of work answers: a call, not only ``is_set()``."""
    calls = [node for node in ast.walk(value) if isinstance(node, ast.Call)]
    return any(paths.last(call.func) != "is_set" for call in calls)


def _takes(call: ast.Call, file: _File) -> bool:
    """Whether ``call`` takes work from a queue (``q.get()``, ``q.get(timeout=1)``,
    ``q.get_nowait()``) or waits, untimed, for an event (``changed.wait()``)."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "input"  # a prompt: the work comes from whoever answers
    if not isinstance(func, ast.Attribute) or file.is_module(func.value):
        return False
    if func.attr == "wait":
        return _waits(call)
    if func.attr == "get_nowait":
        return not call.args and not call.keywords
    if func.attr != "get":
        return False
    # A queue's get takes (block, timeout) alone; `api.get("/status")`, `d.get(key)` do not.
    plain = all(isinstance(a, ast.Constant) and not isinstance(a.value, str) for a in call.args)
    return plain and all(k.arg in ("block", "timeout") for k in call.keywords)


def _grown(body: list[ast.stmt]) -> set[str]:
    """The chains ``body`` multiplies (``delay *= 2``, ``delay = min(delay * 2, 60)``)."""
    grown: set[str] = set()
    for node in paths.own(body, into_loops=True):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult | ast.LShift):
            grown.update(paths.assigned(node.target))
        elif isinstance(node, ast.Assign):
            chains = {key for target in node.targets for key in paths.assigned(target)}
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Mult | ast.LShift):
                    grown.update(chains & {paths.chain_of(sub.left), paths.chain_of(sub.right)})
    return grown


def _backoff(node: ast.AST, grown: set[str], file: _File) -> bool:
    """Whether the wait ``node`` is a backoff: its duration is one the loop (or the function of
    the file that sleeps for it) multiplies."""
    if not isinstance(node, ast.Call):
        return False
    named = file.dotted(node.func)
    if named in _SLEEPS:
        duration = paths.argument(node, 0, "seconds")
    elif file.signalled(node):
        duration = paths.timeout(node, 0)
    else:
        local = file.local(node.func)
        return bool(local) and all(
            any(
                _backoff(call, _grown(function.body), file)
                for call in paths.path_calls(function.body)
                if isinstance(call, ast.Call)
            )
            for function in local
        )
    return duration is not None and any(chain in grown for chain in paths.chains(duration))


def _bounds(loop: ast.AST, context: Context, file: _File) -> set[str]:
    """The names that hold a bound in the loop's function (or module): a lambda or a function
    whose result is an ordering comparison (``expired = lambda: time.monotonic() > end``)."""
    scope: ast.AST | None = next(
        (a for a in context.ancestors(loop) if isinstance(a, _Function | ast.Module)), None
    )
    found: set[str] = set()
    for node in paths.own(getattr(scope, "body", [])):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            if _ordering(node.value.body, file):
                found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, _Function) and node is not scope:
            returns = [r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value]
            if returns and all(_ordering(value, file) for value in returns):
                found.add(node.name)
    return found


def _ordering(node: ast.expr, file: _File) -> bool:
    del file
    return any(
        isinstance(sub, ast.Compare) and any(isinstance(op, _ORDERING) for op in sub.ops)
        for sub in ast.walk(node)
    )


def _probe_until_raised(loop: ast.AST, context: Context, file: _File) -> bool:
    """Whether the loop repeats one call until it raises a named error, caught around the loop
    (``try: while True: os.kill(pid, SIGTERM); time.sleep(0.1)`` ``except OSError:``)."""
    work = [
        stmt
        for stmt in getattr(loop, "body", [])
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call | ast.Await))
        or not _idle([stmt], file)
    ]
    if len(work) != 1 or not isinstance(work[0], ast.Expr):
        return False
    for ancestor in context.ancestors(loop):
        if isinstance(ancestor, paths.SCOPES):
            return False
        if isinstance(ancestor, ast.Try | ast.TryStar) and any(
            paths.names(handler.type) & _PROCESS_GONE for handler in ancestor.handlers
        ):
            return True
    return False


def _held_back(timer: ast.Call, function: _Function, context: Context, file: _File) -> bool:
    """Whether the timer is a one-shot hold-back: created under an ``if`` on the time (a
    throttle: ``if delta > 0:``, ``delta`` computed from a clock) or on the timer itself (a
    debounce: ``if self._timer is None:``)."""
    tests = []
    for ancestor in context.ancestors(timer):
        if ancestor is function:
            break
        if isinstance(ancestor, ast.If):
            tests.append(ancestor.test)
    if not tests:
        return False
    clocks: set[str] = set()
    for _ in range(2):  # `now = time.time()`, then `delta = last + rate - now`
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and file.reads_clock(node.value, clocks):
                clocks.update(key for target in node.targets for key in paths.assigned(target))
    parent = context.parent(timer)
    bound: set[str] = set()
    if isinstance(parent, ast.Assign):
        bound = {key for target in parent.targets for key in paths.assigned(target)}
    return any(
        file.reads_clock(test, clocks) or any(chain in bound for chain in paths.chains(test))
        for test in tests
    )


def _arithmetic(
    node: ast.expr, file: _File, allow: frozenset[str] | set[str] = frozenset()
) -> bool:
    """Whether the only calls in ``node`` are clock readings and min/max/abs/int/float/round
    (and the names in ``allow``)."""
    return all(
        file.is_clock(call)
        or _arithmetic_call(call)
        or (isinstance(call.func, ast.Name) and call.func.id in allow)
        for call in ast.walk(node)
        if isinstance(call, ast.Call)
    )


def _arithmetic_call(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id in _ARITHMETIC


def _duration_getter(call: ast.Call) -> bool:
    """``self.interval()``, ``get_timeout()``: a call of no arguments named for a duration."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return not call.args and not call.keywords and any(w in name.lower() for w in _DURATION_WORDS)


def _waits(node: ast.expr | None) -> bool:
    """Whether ``node`` is ``event.wait()``, an asyncio event's wait (it takes no timeout)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "wait"
        and not node.args
        and not node.keywords
    )


def _logs(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr in _LOGS
    return isinstance(func, ast.Name) and func.id == "print"


def _enclosing_function(node: ast.AST, context: Context) -> _Function | None:
    for ancestor in context.ancestors(node):
        if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef):
            return ancestor
        if isinstance(ancestor, ast.ClassDef):
            return None
    return None


def _refers(node: ast.expr, function: _Function) -> bool:
    """Whether ``node`` is ``function`` itself: its name, ``self.name``, a partial or a lambda."""
    if isinstance(node, ast.Name):
        return node.id == function.name
    if isinstance(node, ast.Attribute):
        positional = [*function.args.posonlyargs, *function.args.args]
        owners = {"self", "cls", *(arg.arg for arg in positional[:1])}
        return (
            node.attr == function.name
            and isinstance(node.value, ast.Name)
            and node.value.id in owners
        )
    if isinstance(node, ast.Call):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        return called == "partial" and bool(node.args) and _refers(node.args[0], function)
    if isinstance(node, ast.Lambda):
        return isinstance(node.body, ast.Call) and _refers(node.body.func, function)
    return False


def _calls(caller: _Function, callee: _Function) -> bool:
    """Whether ``caller`` calls ``callee`` (by name, or ``self.<name>``), behind a stop switch
    or not."""
    return any(
        isinstance(call, ast.Call) and _refers(call.func, callee) for call in paths.own(caller.body)
    )


def _started(timer: ast.Call, function: _Function, context: Context) -> bool:
    """Whether ``function`` starts the timer ``timer`` creates: at once, or by the name it binds."""
    parent = context.parent(timer)
    if isinstance(parent, ast.Attribute):
        return parent.attr == "start"
    if not isinstance(parent, ast.Assign | ast.AnnAssign):
        return False
    targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
    names = {key for target in targets for key in paths.assigned(target)}
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "start"
        and paths.chain_of(node.func.value) in names
        for node in ast.walk(function)
    )
