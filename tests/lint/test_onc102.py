"""ONC102 second scheduler: other scheduling libraries and mechanisms, and their look-alikes."""

from __future__ import annotations

import pytest
from _rule_support import FIXTURES, fired, marked

from oncely.lint.rules.onc102_second_scheduler import (
    SCHEDULE_SETTINGS,
    SCHEDULER_MODULES,
    SCHEDULING_NAMES,
    SecondScheduler,
)

RULE = SecondScheduler


def test_the_violating_example_fires_and_the_clean_one_does_not() -> None:
    assert fired("ONC102", RULE.violating) == [1]
    assert fired("ONC102", RULE.clean) == []


def test_the_fixture_fires_exactly_at_its_marked_lines() -> None:
    fixture = FIXTURES / "ONC102.py"
    assert fired("ONC102", fixture.read_text()) == marked(fixture)


@pytest.mark.parametrize(
    "source",
    [
        "import apscheduler\n",
        "from apscheduler.schedulers.asyncio import AsyncIOScheduler as S\n",
        "import schedule as sch\n",
        "import sched as stdlib_scheduler\n",
        "from rq_scheduler import Scheduler\n",
        # A cron parser (crontab, celery.schedules) is a scheduler where the file schedules.
        "from crontab import CronTab\ncron = CronTab(user=True)\n",
        "import aiocron\n",
        "from timeloop import Timeloop\n",
        "from celery.beat import PersistentScheduler\n",
        "from django_celery_beat.models import PeriodicTask\n",
        "sender.add_periodic_task(60.0, ping.s())\n",
        "CELERYBEAT_SCHEDULE = {}\n",
        "@huey.periodic_task(crontab(minute='0'))\ndef hourly(): ...\n",
        "@scheduler.scheduled_job('interval', minutes=1)\ndef tick(): ...\n",
        "from fastapi_utilities import repeat_every\n",
        "@periodic_task\ndef nightly(): ...\n",
    ],
)
def test_disguises_fire(source: str) -> None:
    assert fired("ONC102", source) != []


@pytest.mark.parametrize(
    "source",
    [
        "import oncely\n",
        "from oncely import every, cron\n",
        "from myapp import schedule_helpers\n",
        "from .schedule import weekly\n",  # a relative module of the project's own
        "import scheduler_config\n",
        "schedule = load_timetable()\n",
        "def schedule(run): ...\n",
        "from crontab_parser import parse\n",
        "app.schedule(remind, oncely.every(hours=1), key='k')\n",
        "beat_schedule_docs = 'see the wiki'\n",
        "import schedules\n",
    ],
)
def test_look_alikes_do_not_fire(source: str) -> None:
    assert fired("ONC102", source) == []


def test_an_allowed_module_is_not_reported() -> None:
    from pathlib import Path

    from oncely.lint import LintConfig, lint_source

    config = LintConfig(root=Path("/p"), allow={"ONC102": ("legacy/*.py",)})
    assert lint_source(Path("/p/legacy/jobs.py"), "import schedule\n", config) == []
    assert lint_source(Path("/p/app/jobs.py"), "import schedule\n", config) != []


def test_every_way_it_fires_names_a_trigger() -> None:
    """The walk skips a file with none of the rule's triggers in its text: every module's
    components (each is written out in an import), scheduling name and setting holds one."""
    for module in SCHEDULER_MODULES:
        assert any(t in part for part in module.split(".") for t in RULE.triggers), module
    for name in [*SCHEDULING_NAMES, *SCHEDULE_SETTINGS]:
        assert any(t in name for t in RULE.triggers), name
