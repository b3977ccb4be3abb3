"""ONC103 unguarded scheduled function: scheduled elsewhere, with neither a lock nor a note."""

from __future__ import annotations

import pytest
from _rule_support import FIXTURES, fired, marked

from oncely.lint.rules.onc103_unguarded_scheduled_function import (
    REGISTRATIONS,
    SCHEDULING_DECORATORS,
    UnguardedScheduledFunction,
)

RULE = UnguardedScheduledFunction


def test_the_violating_example_fires_and_the_clean_one_does_not() -> None:
    assert fired("ONC103", RULE.violating) == [7]
    assert fired("ONC103", RULE.clean) == []


def test_the_fixture_fires_exactly_at_its_marked_lines() -> None:
    fixture = FIXTURES / "ONC103.py"
    assert fired("ONC103", fixture.read_text()) == marked(fixture)


@pytest.mark.parametrize(
    "source",
    [
        "@sched.scheduled_job('interval', seconds=30)\ndef poll(): ...\n",
        "@huey.periodic_task(crontab(minute='0'))\ndef hourly(): ...\n",
        "@periodic_task\ndef nightly(): ...\n",
        "@repeat_every(seconds=60)\nasync def refresh(): ...\n",
        "@aiocron.crontab('*/5 * * * *')\nasync def sync(): ...\n",
        "def job(): ...\nscheduler.add_job(job, 'interval', minutes=5)\n",
        "def job(): ...\nschedule.every(5).minutes.do(job)\n",
        "def cleanup(): ...\n\ndef setup(sender, **kw):\n"
        "    sender.add_periodic_task(60.0, cleanup.s())\n",
        "@scheduler.scheduled_job('cron', hour=1)  # oncely: idempotent\ndef export(): ...\n",
        "@scheduler.scheduled_job('cron', hour=1)\n@other.decorator\ndef export(): ...\n",
        "@scheduler.scheduled_job('cron', hour=1)\ndef export():\n    with open('f'):\n"
        "        pass\n",
    ],
)
def test_disguises_fire(source: str) -> None:
    assert fired("ONC103", source) != []


@pytest.mark.parametrize(
    "source",
    [
        "@app.job(oncely.every(minutes=5))\ndef sync(run): ...\n",
        "@scheduler.scheduled_job('cron', hour=1)\n@app.lock('x', at_most=T)\ndef f(): ...\n",
        "@scheduler.scheduled_job('cron', hour=1)\ndef f():\n    with app.lock('x', at_most=T):\n"
        "        pass\n",
        "guard = app.lock('x', at_most=T)\n\n@periodic_task\n@guard\ndef f(): ...\n",
        "guard = app.lock('x', at_most=T)\n\n@periodic_task\ndef f():\n    with guard:\n"
        "        pass\n",
        "# oncely: idempotent -- recomputes a view from scratch\n@periodic_task\ndef f(): ...\n",
        "def job(): ...\nqueue.do(job)\n",  # not the schedule library's every().do()
        "def job(): ...\nexecutor.submit(job)\n",
        "def helper(): ...\nscheduler.add_job(imported_elsewhere)\n",  # defined in another file
        "@functools.cache\ndef settings(): ...\n",
        # A form feed is a space to Python, not a line break: the note is still on the def line.
        "\x0c\n@periodic_task\ndef f():  # oncely: idempotent -- recomputes a view\n    pass\n",
    ],
)
def test_look_alikes_do_not_fire(source: str) -> None:
    assert fired("ONC103", source) == []


def test_every_way_it_fires_names_a_trigger() -> None:
    """The walk skips a file with none of the rule's triggers in its text: every scheduling
    decorator and registration holds one (``.do`` needs an ``every(...)`` before it)."""
    for name in [*SCHEDULING_DECORATORS, *(REGISTRATIONS - {"do"}), "every"]:
        assert any(t in name for t in RULE.triggers), name
