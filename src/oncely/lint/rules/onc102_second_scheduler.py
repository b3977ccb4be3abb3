"""ONC102: a second scheduler: another scheduling library or mechanism."""

from __future__ import annotations

import ast

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
    a `beat_schedule` setting.

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

    def visit_Import(self, node: ast.Import, context: Context) -> None:
        for alias in node.names:
            what = _scheduler(alias.name)
            if what is not None:
                self.report(context, node, f"{what} ({alias.name}); {_ADVICE}")

    def visit_ImportFrom(self, node: ast.ImportFrom, context: Context) -> None:
        if node.level or node.module is None:
            return
        what = _scheduler(node.module)
        if what is None:
            imported = [a.name for a in node.names if a.name in SCHEDULING_NAMES]
            if imported:
                what = SCHEDULING_NAMES[imported[0]]
        if what is not None:
            self.report(context, node, f"{what} ({node.module}); {_ADVICE}")

    def visit_Call(self, node: ast.Call, context: Context) -> None:
        name = _called_name(node.func)
        if name in SCHEDULING_NAMES:
            self.report(context, node, f"{SCHEDULING_NAMES[name]}; {_ADVICE}")
            return
        for keyword in node.keywords:  # app.conf.update(beat_schedule={...})
            if keyword.arg in SCHEDULE_SETTINGS:
                self.report(context, node, f"a Celery beat schedule ({keyword.arg}); {_ADVICE}")

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
                self.report(context, decorator, f"{SCHEDULING_NAMES[name]}; {_ADVICE}")

    def visit_Assign(self, node: ast.Assign, context: Context) -> None:
        for target in node.targets:
            self._setting(target, node, context)

    def visit_AnnAssign(self, node: ast.AnnAssign, context: Context) -> None:
        self._setting(node.target, node, context)

    def _setting(self, target: ast.expr, node: ast.stmt, context: Context) -> None:
        name = _called_name(target)
        if name in SCHEDULE_SETTINGS:
            self.report(context, node, f"a Celery beat schedule ({name}); {_ADVICE}")


def _called_name(node: ast.expr) -> str | None:
    """``f`` for ``f``, ``x.f`` for ``x.y.f``: the last name of a dotted expression."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None
