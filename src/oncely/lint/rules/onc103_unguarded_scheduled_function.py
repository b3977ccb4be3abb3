"""ONC103: a function another framework schedules, without an oncely lock or an idempotency note."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oncely.lint.rules.base import Context, Rule

#: Decorators (the last name of a dotted decorator) that schedule the function they decorate.
SCHEDULING_DECORATORS = {
    "scheduled_job",
    "periodic_task",
    "db_periodic_task",
    "repeat_every",
    "crontab",
}
#: Calls whose first argument, or the `.s()`/`.si()` signature in it, is scheduled.
REGISTRATIONS = {"add_job", "add_periodic_task", "do"}
IDEMPOTENT = re.compile(r"#\s*oncely:\s*idempotent\b(?:\s*--\s*(?P<reason>.*))?")

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class _File:
    #: Every function and method of the file by name, at any depth, in the order defined:
    #: read when a registration is first met (most files have none).
    functions: dict[str, list[Function]] | None = None
    locks: set[str] = field(default_factory=set)
    reported: set[int] = field(default_factory=set)

    def every_function(self, context: Context) -> dict[str, list[Function]]:
        if self.functions is None:
            self.functions = {}
            for found in ast.walk(context.tree or ast.Module(body=[], type_ignores=[])):
                if isinstance(found, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.functions.setdefault(found.name, []).append(found)
            for functions in self.functions.values():
                functions.sort(key=lambda function: function.lineno)
        return self.functions


class UnguardedScheduledFunction(Rule):
    """## What it does
    Finds a function that another framework schedules (an APScheduler `scheduled_job` or
    `add_job`, Celery `periodic_task` or `add_periodic_task`, `repeat_every`, aiocron, the
    `schedule` library's `.do(...)`) that is neither guarded by an oncely lock nor marked with a
    written idempotency decision. The job may be passed by keyword (`add_job(func=job)`,
    `add_periodic_task(60, sig=job.s())`), be a method (`self.poll`) or be defined inside a
    function; the finding is at the function and names the line that registers it.

    ## Why is this bad?
    Those schedulers fire once per process that runs them: with two instances, twice, and in a
    rolling deploy, on old and new code at once. Either only one instance may run it (take an
    `app.lock`), or running it twice must be harmless, and someone has to have said why.

    ## Example
    ```python
    @scheduler.scheduled_job("cron", hour=3)
    def rebuild_search_index() -> None: ...
    ```

    ## Use instead
    ```python
    @scheduler.scheduled_job("cron", hour=3)
    @app.lock("rebuild-search-index", at_most=timedelta(hours=1))
    def rebuild_search_index() -> None: ...

    @scheduler.scheduled_job("interval", minutes=1)
    def refresh_cache() -> None:  # oncely: idempotent -- it only overwrites a cache entry
        ...
    ```
    Better still, move it to ``@app.job(...)`` (see ONC102).
    """

    code = "ONC103"
    name = "unguarded-scheduled-function"
    message = "scheduled by another framework without an oncely lock or idempotency note"
    # Every finding names one, in the file: a decorator of SCHEDULING_DECORATORS or a call of
    # REGISTRATIONS, the schedule library's ``.do`` only after an ``every(...)``. A test checks
    # each table entry.
    triggers = ("scheduled_job", "periodic_task", "crontab", "add_job", "every")
    violating = (
        "from apscheduler.schedulers.background import BackgroundScheduler\n"
        "\n"
        "scheduler = BackgroundScheduler()\n"
        "\n"
        "\n"
        "@scheduler.scheduled_job('cron', hour=3)\n"
        "def rebuild_search_index():\n"
        "    pass\n"
    )
    clean = (
        "from datetime import timedelta\n"
        "\n"
        "import oncely\n"
        "from apscheduler.schedulers.background import BackgroundScheduler\n"
        "\n"
        "app = oncely.App()\n"
        "scheduler = BackgroundScheduler()\n"
        "\n"
        "\n"
        "@scheduler.scheduled_job('cron', hour=3)\n"
        "@app.lock('rebuild-search-index', at_most=timedelta(hours=1))\n"
        "def rebuild_search_index():\n"
        "    pass\n"
    )

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        self._files: dict[int, _File] = {}

    def visit_Module(self, node: ast.Module, context: Context) -> None:
        state = _File()
        for statement in node.body:
            if isinstance(statement, ast.Assign) and _is_lock(statement.value, set()):
                state.locks.update(t.id for t in statement.targets if isinstance(t, ast.Name))
        self._files = {id(context): state}

    def visit_FunctionDef(self, node: ast.FunctionDef, context: Context) -> None:
        self._decorated(node, context)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef, context: Context) -> None:
        self._decorated(node, context)

    def visit_Call(self, node: ast.Call, context: Context) -> None:
        if not isinstance(node.func, ast.Attribute) or node.func.attr not in REGISTRATIONS:
            return
        if node.func.attr == "do" and not _chain_has(node.func.value, "every"):
            return  # only the schedule library's every(...)....do(job)
        registered = _registered(node, node.func.attr)
        target = None if registered is None else _registered_name(registered)
        state = self._files.get(id(context))
        if target is None or state is None or target not in state.every_function(context):
            return
        # The definition the call sees: the last one above it (a nested def shadows an outer).
        candidates = state.every_function(context)[target]
        above = [f for f in candidates if f.lineno <= node.lineno]
        function = above[-1] if above else candidates[0]
        self._check(function, context, f"scheduled by .{node.func.attr}(...) at line {node.lineno}")

    def _decorated(self, node: Function, context: Context) -> None:
        for decorator in node.decorator_list:
            name = _last_name(decorator.func if isinstance(decorator, ast.Call) else decorator)
            if name in SCHEDULING_DECORATORS:
                self._check(node, context, f"scheduled by @{name} at line {decorator.lineno}")
                return

    def _check(self, function: Function, context: Context, how: str) -> None:
        state = self._files.get(id(context)) or _File()
        if id(function) in state.reported or _guarded(function, state.locks):
            return
        note = _idempotency_note(function, context.lines)
        if note == "":
            self.report(
                context,
                function,
                f"{function.name!r} {how}: its '# oncely: idempotent' note gives no reason; "
                "write '# oncely: idempotent -- why running it twice is harmless'",
            )
        elif note is None:
            self.report(
                context,
                function,
                f"{function.name!r} {how}; guard it with @app.lock(...) or write "
                "'# oncely: idempotent -- why running it twice is harmless'",
            )
        state.reported.add(id(function))


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _chain_has(node: ast.expr, name: str) -> bool:
    """Whether a call chain like ``schedule.every(10).minutes`` contains a call to ``name``."""
    while True:
        if isinstance(node, ast.Call):
            if _last_name(node.func) == name:
                return True
            node = node.func
        elif isinstance(node, ast.Attribute):
            node = node.value
        else:
            return False


def _registered(call: ast.Call, how: str) -> ast.expr | None:
    """What a registration schedules: ``add_job(job, ...)`` or ``add_job(func=job)``;
    ``add_periodic_task(schedule, job.s())`` or ``sig=job.s()``; ``every(...)....do(job)``."""
    keyword = {"add_job": "func", "add_periodic_task": "sig"}.get(how)
    given = next((k.value for k in call.keywords if keyword and k.arg == keyword), None)
    if given is not None:
        return given
    if not call.args:
        return None
    if how == "add_periodic_task" and len(call.args) > 1:
        return call.args[1]
    return call.args[0]


def _registered_name(node: ast.expr) -> str | None:
    """``job`` for ``job``, ``job.s()``, ``job.si(...)``, ``job.delay``; ``poll`` for
    ``self.poll``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            return node.attr
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_lock(node: ast.expr, locks: set[str]) -> bool:
    """``<anything>.lock(...)`` or a module-level name bound to one."""
    if isinstance(node, ast.Call) and _last_name(node.func) == "lock":
        return True
    return isinstance(node, ast.Name) and node.id in locks


def _guarded(function: Function, locks: set[str]) -> bool:
    if any(_is_lock(d, locks) for d in function.decorator_list):
        return True
    for statement in function.body:
        if isinstance(statement, ast.With | ast.AsyncWith) and any(
            _is_lock(item.context_expr, locks) for item in statement.items
        ):
            return True
    return False


def _idempotency_note(function: Function, lines: list[str]) -> str | None:
    """The reason of an ``# oncely: idempotent -- reason`` note on the decorators, the def line
    or the line above them; "" for a note without a reason; None when there is no note."""
    first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
    for number in range(max(first - 1, 1), function.body[0].lineno):
        match = IDEMPOTENT.search(lines[number - 1]) if number <= len(lines) else None
        if match is not None:
            return (match["reason"] or "").strip()
    return None
