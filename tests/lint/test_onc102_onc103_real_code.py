"""ONC102 and ONC103 on shapes met in real projects (issue 23): one finding per scheduler
library per file, cron parsing is no scheduler, and jobs registered by keyword or defined in
a function are found, with the line that registers them."""

from __future__ import annotations

from pathlib import Path

import pytest
from _rule_support import fired

from oncely.lint import LintConfig, lint_source


def _messages(code: str, source: str) -> list[tuple[int, str]]:
    config = LintConfig(root=Path("/nonexistent"), select=(code,))
    return [(f.line, f.message) for f in lint_source(Path("m.py"), source, config)]


def test_one_onc102_finding_per_scheduler_library_per_file() -> None:
    source = (
        "from apscheduler.schedulers.background import BackgroundScheduler\n"
        "from apscheduler.triggers.interval import IntervalTrigger\n"
        "import schedule\n"
        "from .runner import repeat_every\n"
        "\n"
        "@repeat_every(seconds=60)\n"
        "def refresh(): ...\n"
        "\n"
        "@repeat_every(seconds=3600)\n"
        "def rebuild(): ...\n"
        "\n"
        "scheduler = BackgroundScheduler()\n"
        "scheduler.add_job(refresh, IntervalTrigger(minutes=5))\n"
    )
    assert fired("ONC102", source) == [1, 3, 6]


def test_the_same_library_in_two_files_is_one_finding_in_each() -> None:
    one = "import apscheduler\nfrom apscheduler.triggers.cron import CronTrigger\nCronTrigger\n"
    assert fired("ONC102", one, path="a.py") == [1]
    assert fired("ONC102", one, path="b.py") == [1]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "from crontab import CronTab\n\n"
            "def valid(expression):\n"
            "    try:\n"
            "        CronTab(expression)\n"
            "    except ValueError:\n"
            "        return False\n"
            "    return True\n",
            id="crontab-parses-a-cron-string",
        ),
        pytest.param(
            "from apscheduler.triggers.cron import CronTrigger\n\n"
            "def clean_cron(value):\n"
            "    CronTrigger.from_crontab(value)\n"
            "    return value\n",
            id="apscheduler-cron-trigger-validates-a-form-field",
        ),
        pytest.param(
            "from celery.schedules import crontab\n\n"
            "def describe(expression):\n"
            "    return str(crontab(*expression.split()))\n",
            id="celery-crontab-describes-a-cron-string",
        ),
    ],
)
def test_a_cron_library_used_only_to_parse_is_not_a_second_scheduler(source: str) -> None:
    assert fired("ONC102", source) == []


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "from crontab import CronTab\n\ncron = CronTab(user=True)\n"
            "job = cron.new(command='backup')\ncron.write()\n",
            id="python-crontab-writes-the-crontab",
        ),
        pytest.param(
            "from celery.schedules import crontab\n\n"
            "def beat(minute):\n    return {'task': 't', 'schedule': crontab(minute=minute)}\n",
            id="celery-crontab-in-a-beat-entry",
        ),
        pytest.param(
            "from apscheduler.triggers.cron import CronTrigger\n\n"
            "def plan(sched, job):\n    sched.add_job(job, trigger=CronTrigger(hour=3))\n",
            id="apscheduler-cron-trigger-given-to-add-job",
        ),
    ],
)
def test_a_cron_library_that_schedules_is_still_reported(source: str) -> None:
    assert fired("ONC102", source) == [1]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "def job(): ...\n\nscheduler.add_job(func=job, trigger='interval', minutes=5)\n",
            id="add-job-func-keyword",
        ),
        pytest.param(
            "def cleanup(): ...\n\ndef setup(sender, **kw):\n"
            "    sender.add_periodic_task(60.0, sig=cleanup.s())\n",
            id="add-periodic-task-sig-keyword",
        ),
        pytest.param(
            "def start(scheduler):\n"
            "    def refresh():\n"
            "        pass\n"
            "    scheduler.add_job(refresh, 'interval', minutes=5)\n",
            id="job-defined-inside-a-function",
        ),
        pytest.param(
            "class Plugin:\n"
            "    def poll(self):\n"
            "        pass\n"
            "    def start(self):\n"
            "        self.scheduler.add_job(self.poll, 'interval', seconds=30)\n",
            id="method-registered-through-self",
        ),
    ],
)
def test_a_job_registered_by_keyword_or_defined_in_a_function_fires(source: str) -> None:
    assert len(fired("ONC103", source)) == 1


def test_onc103_names_the_line_that_registers_the_job() -> None:
    source = "def job(): ...\n\n\nscheduler.add_job(func=job, trigger='cron', hour=3)\n"
    [(line, message)] = _messages("ONC103", source)
    assert line == 1
    assert "'job' scheduled by .add_job(...) at line 4" in message
    decorated = "@scheduler.scheduled_job('cron', hour=3)\ndef rebuild(): ...\n"
    [(line, message)] = _messages("ONC103", decorated)
    assert line == 2
    assert "'rebuild' scheduled by @scheduled_job at line 1" in message
