"""ONC102: a second scheduler: another scheduling library or mechanism."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from oncely.lint.rules.base import Context, Rule

#: Modules whose import is itself a second scheduler (the module or anything under it).
SCHEDULER_MODULES = {
    "apscheduler": "APScheduler",
    "schedule": "the schedule library",
    "sched": "the sched module",
    "celery.schedules": "Celery beat schedules",
    "celery.beat": "Celery beat",
    "django_celery_beat": "django-celery-beat",
    "redbeat": "celery-redbeat",
    "rq_scheduler": "rq-scheduler",
    "crontab": "a crontab writer (python-crontab)",
    "aiocron": "aiocron",
    "timeloop": "timeloop",
    "fastapi_utils.tasks": "fastapi-utils repeat_every",
    "fastapi_utilities": "fastapi-utilities repeat_every",
    "arq.cron": "arq cron jobs",
    "dramatiq_crontab": "dramatiq-crontab",
    "huey.api": "huey periodic tasks",
    "django_q.tasks": "django-q schedules",
}
#: Names that schedule wherever they come from: decorators and calls.
SCHEDULING_NAMES = {
    "repeat_every": "a repeat_every decorator",
    "periodic_task": "a periodic_task decorator",
    "db_periodic_task": "a periodic_task decorator",
    "add_periodic_task": "Celery add_periodic_task",
    "scheduled_job": "an APScheduler scheduled_job",
}
#: Assignments that configure a scheduler.
SCHEDULE_SETTINGS = {"beat_schedule", "CELERYBEAT_SCHEDULE", "CELERY_BEAT_SCHEDULE"}
_ADVICE = "schedule it with @app.job(oncely.cron(...) or oncely.every(...)) instead"
#: Modules that also parse cron strings: an import of one is a scheduler only where the file
#: schedules with it (`_schedules`), not where it only parses or validates an expression.
CRON_PARSERS = {"crontab", "celery.schedules", "apscheduler.triggers.cron"}
#: What schedules in a file: calls, keywords and a beat entry's key.
_SCHEDULING_CALLS = {"add_job", "add_periodic_task", "scheduled_job", "new", "write", "every"}
_SCHEDULING_KEYWORDS = {"trigger", "schedule", "user", "tabfile"}


def _scheduler(module: str) -> str | None:
    for name, what in SCHEDULER_MODULES.items():
        if module == name or module.startswith(name + "."):
            return what
    return None


class SecondScheduler(Rule):
    """## What it does
    Finds another scheduler: an import of APScheduler, `schedule`, `sched`, Celery beat,
    rq-scheduler, aiocron, timeloop, `repeat_every`, a crontab writer and the like; a
    `periodic_task`, `scheduled_job` or `repeat_every` decorator; Celery's `add_periodic_task`;
    a `beat_schedule` setting. One finding per scheduler library per file, at the first use
    the walk meets: the library is in the file or it is not. A module that also parses cron
    strings (`crontab`, `celery.schedules`, `apscheduler.triggers.cron`) is reported only in a
    file that schedules (registers a job, gives a `trigger=` or a beat entry's `"schedule"`,
    writes a crontab), not in one that only parses or validates an expression.

    ## Why is this bad?
    Each of these fires once per process that starts it: with two instances of the app, twice.
    None of them keeps the record oncely keeps, so "did last Tuesday's run happen?" has one
    answer per scheduler, if any. One way per concern: the code base has one scheduler.

    ## Example
    ```python
    from apscheduler.schedulers.background import BackgroundScheduler

    scheduler = BackgroundScheduler()
    scheduler.add_job(send_digest, "cron", hour=9)
    ```

    ## Use instead
    ```python
    @app.job(oncely.cron("0 9 * * *"))
    def send_digest(run: oncely.Run) -> None: ...
    ```
    A module that must keep the old scheduler while it is migrated is listed under
    ``[tool.oncely.lint.allow] ONC102 = [...]``.
    """

    code = "ONC102"
    name = "second-scheduler"
    message = "a second scheduler"
    # Every finding names one, in the file: a module of SCHEDULER_MODULES (each of its
    # components is written out, whatever the spacing around the dots), a name of
    # SCHEDULING_NAMES or a setting of SCHEDULE_SETTINGS. A test checks each table entry.
    triggers = (
        *("sched", "SCHEDULE", "celery", "redbeat", "cron", "timeloop", "fastapi_util"),
        *("huey", "django_q", "repeat_every", "periodic_task"),
    )
    violating = (
        "from apscheduler.schedulers.background import BackgroundScheduler\n"
        "\n"
        "scheduler = BackgroundScheduler()\n"
    )
    clean = (
        "import oncely\n"
        "\n"
        "app = oncely.App()\n"
        "\n"
        "\n"
        "@app.job(oncely.cron('0 9 * * *'))\n"
        "def send_digest(run):\n"
        "    pass\n"
    )

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        # Of the file being walked: the schedulers reported (one finding each), the names its
        # imports bind to a scheduler, and whether it schedules with a cron parser (once read).
        self._reported: set[str] = set()
        self._bound: dict[str, str] | None = None
        self._schedules: bool | None = None

    def visit_Module(self, node: ast.Module, context: Context) -> None:
        self._reported, self._bound, self._schedules = set(), None, None

    def _library(self, name: str, context: Context) -> str:
        """The scheduler a scheduling name belongs to: the one its import names, if any."""
        if self._bound is None:
            self._bound = {}
            for found in ast.walk(context.tree or ast.Module(body=[], type_ignores=[])):
                if isinstance(found, ast.ImportFrom) and not found.level and found.module:
                    what = _scheduler(found.module)
                    for alias in found.names:
                        if what is not None or alias.name in SCHEDULING_NAMES:
                            bound = alias.asname or alias.name
                            self._bound[bound] = what or SCHEDULING_NAMES[alias.name]
        return self._bound.get(name, SCHEDULING_NAMES[name])

    def _once(self, context: Context, node: ast.AST, what: str, detail: str) -> None:
        """Report scheduler ``what`` at ``node``, unless the file's finding of it is made."""
        library = "Celery" if what.startswith("Celery") else what  # its modules and settings
        if library not in self._reported:
            self._reported.add(library)
            self.report(context, node, f"{detail}; {_ADVICE}")

    def _parses_only(self, module: str, context: Context) -> bool:
        if module not in CRON_PARSERS:
            return False
        if self._schedules is None:
            self._schedules = _schedules(context.tree)
        return not self._schedules

    def visit_Import(self, node: ast.Import, context: Context) -> None:
        for alias in node.names:
            what = _scheduler(alias.name)
            if what is not None and not self._parses_only(alias.name, context):
                self._once(context, node, what, f"{what} ({alias.name})")

    def visit_ImportFrom(self, node: ast.ImportFrom, context: Context) -> None:
        if node.level or node.module is None:
            return
        what = _scheduler(node.module)
        if what is None:
            imported = [a.name for a in node.names if a.name in SCHEDULING_NAMES]
            if imported:
                what = SCHEDULING_NAMES[imported[0]]
        if what is not None and not self._parses_only(node.module, context):
            self._once(context, node, what, f"{what} ({node.module})")

    def visit_Call(self, node: ast.Call, context: Context) -> None:
        name = _called_name(node.func)
        if name in SCHEDULING_NAMES:
            what = self._library(name, context)
            self._once(context, node, what, what)
            return
        for keyword in node.keywords:  # app.conf.update(beat_schedule={...})
            if keyword.arg in SCHEDULE_SETTINGS:
                what = f"a Celery beat schedule ({keyword.arg})"
                self._once(context, node, "Celery beat", what)

    def visit_FunctionDef(self, node: ast.FunctionDef, context: Context) -> None:
        self._decorators(node, context)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef, context: Context) -> None:
        self._decorators(node, context)

    def _decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef, context: Context) -> None:
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call):
                continue  # reported by visit_Call
            name = _called_name(decorator)
            if name in SCHEDULING_NAMES:
                what = self._library(name, context)
                self._once(context, decorator, what, what)

    def visit_Assign(self, node: ast.Assign, context: Context) -> None:
        for target in node.targets:
            self._setting(target, node, context)

    def visit_AnnAssign(self, node: ast.AnnAssign, context: Context) -> None:
        self._setting(node.target, node, context)

    def _setting(self, target: ast.expr, node: ast.stmt, context: Context) -> None:
        name = _called_name(target)
        if name in SCHEDULE_SETTINGS:
            self._once(context, node, "Celery beat", f"a Celery beat schedule ({name})")


def _called_name(node: ast.expr) -> str | None:
    """``f`` for ``f``, ``x.f`` for ``x.y.f``: the last name of a dotted expression."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _schedules(tree: ast.AST | None) -> bool:
    """Whether the file schedules something: registers a job, gives a trigger or schedule, or
    writes a crontab (`_SCHEDULING_CALLS`, `_SCHEDULING_KEYWORDS`, a ``"schedule"`` key)."""
    for node in ast.walk(tree or ast.Module(body=[], type_ignores=[])):
        if isinstance(node, ast.Call):
            if _called_name(node.func) in _SCHEDULING_CALLS | SCHEDULING_NAMES.keys():
                return True
            if any(keyword.arg in _SCHEDULING_KEYWORDS for keyword in node.keywords):
                return True
        elif isinstance(node, ast.Dict):
            if any(isinstance(k, ast.Constant) and k.value == "schedule" for k in node.keys):
                return True
        elif isinstance(node, ast.Name) and node.id in SCHEDULE_SETTINGS:
            return True
    return False
