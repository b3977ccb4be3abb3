"""ONC000, suppression without a reason: its disguises fire, its look-alikes do not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oncely.lint import LintConfig, lint_source
from oncely.lint.rules.onc000_suppression_without_reason import SuppressionWithoutReason

RULE = SuppressionWithoutReason
#: The expected lines are those marked ``# fires``.
MARKED = None


def _findings(
    source: str | bytes, codes: tuple[str, ...] = ("ONC000",)
) -> list[tuple[int, int, str]]:
    config = LintConfig(root=Path("/nonexistent"), select=codes)
    return sorted((f.line, f.col, f.message) for f in lint_source(Path("m.py"), source, config))


def _lines(source: str | bytes) -> list[int]:
    return [line for line, _, _ in _findings(source)]


def _marked(source: str) -> list[int]:
    return [n for n, line in enumerate(source.splitlines(), 1) if line.endswith("# fires")]


def _unmarked(source: str) -> str:
    """``source`` without its ``# fires`` marks (a mark is itself a comment after the
    suppression, which must change nothing)."""
    return re.sub(r"\s*# fires$", "", source, flags=re.MULTILINE)


def test_the_violating_example_fires_at_its_line_and_the_clean_one_does_not() -> None:
    assert _lines(RULE.violating) == [3]
    assert _findings(RULE.clean) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        pytest.param(
            'name = "café"  # oncely: allow ONC101\n',
            (
                1,
                17,
                "suppression of ONC101 without a reason; write "
                "'# oncely: allow ONC101 -- why this is the one exception'",
            ),
            id="column-counted-in-bytes",
        ),
        pytest.param(
            "x = 1  # oncely: allow -- the vendor loop\n",
            (
                1,
                8,
                "suppression names no rule code; write "
                "'# oncely: allow CODE -- why this is the one exception'",
            ),
            id="no-code",
        ),
        pytest.param(
            "x = 1  # oncely: allow ONC110 -- the vendor loop\n",
            (1, 8, "suppression of unknown code ONC110; 'oncely lint --rules' lists the codes"),
            id="unknown-code",
        ),
        pytest.param(
            "x = 1  # noqa: E501  # oncely: allow onc101 onc102\n",
            (
                1,
                22,
                "suppression of ONC101, ONC102 without a reason; write "
                "'# oncely: allow ONC101, ONC102 -- why this is the one exception'",
            ),
            id="after-another-tools-comment",
        ),
    ],
)
def test_the_message_says_what_is_wrong_and_where(source: str, found: tuple[int, int, str]) -> None:
    assert _findings(source) == [found]


DISGUISES = [
    pytest.param(
        """\
import time

while True:  # oncely: allow ONC101, ONC102  # fires
    work()
    time.sleep(60)
""",
        MARKED,
        id="several-codes",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101 ONC102  # fires\n",
        MARKED,
        id="several-codes-separated-by-spaces",
    ),
    pytest.param(
        "x = 1  #  Oncely :  ALLOW   onc101  # fires\n",
        MARKED,
        id="other-case-and-extra-spaces",
    ),
    pytest.param(
        "x = 1\t#\toncely:\tallow\tONC101\t# fires\n",
        MARKED,
        id="tab-separators",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101 -- \n",
        [1],
        id="dashes-then-only-whitespace",
    ),
    pytest.param(
        "x = 1\ny = 2  # oncely: allow ONC101 ---\n",
        [2],
        id="only-dashes",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101 -- ... -- ?\n",
        [1],
        id="only-punctuation",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101 -- # type: ignore[misc]\n",
        [1],
        id="the-reason-is-another-tools-comment",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101  # noqa: E501  # fires\n",
        MARKED,
        id="no-dashes-then-another-tools-comment",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101 because the SDK reconnects  # fires\n",
        MARKED,
        id="a-reason-without-the-dashes",
    ),
    pytest.param(
        """\
import threading

timer = threading.Timer(
    30,  # oncely: allow ONC101  # fires
    beat,
)
""",
        MARKED,
        id="inside-a-multi-line-call",
    ),
    pytest.param(
        """\
total = 1 + \\
    2  # oncely: allow ONC101  # fires
""",
        MARKED,
        id="after-a-backslash-continuation",
    ),
    pytest.param(
        """\
@scheduler.scheduled_job("cron", hour=3)  # oncely: allow ONC103  # fires
def rebuild_index():
    pass
""",
        MARKED,
        id="on-a-decorator-line",
    ),
    pytest.param(
        'url = "https://example.com/#top"  # oncely: allow ONC101  # fires\n',
        MARKED,
        id="after-a-string-holding-a-hash",
    ),
    pytest.param(
        "x = 1  # oncely: allow  # fires\n",
        MARKED,
        id="no-code-at-all",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC999 -- the vendor loop  # fires\n",
        MARKED,
        id="unknown-code-with-a-reason",
    ),
    pytest.param(
        """\
import time

# oncely: allow ONC101  # fires
while True:
    time.sleep(60)
""",
        MARKED,
        id="on-its-own-line",
    ),
    pytest.param(
        """\
def run():
    # oncely: allow ONC101 -- the vendor loop
    x = 1  # oncely: allow ONC102  # fires
""",
        MARKED,
        id="the-one-without-a-reason-among-others",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101",
        [1],
        id="no-newline-at-the-end-of-the-file",
    ),
    pytest.param(
        b"x = 1\r\ny = 2  # oncely: allow ONC101\r\n",
        [2],
        id="crlf-line-ends",
    ),
]


@pytest.mark.parametrize(("source", "lines"), DISGUISES)
def test_a_disguised_suppression_without_a_reason_fires(
    source: str | bytes, lines: list[int] | None
) -> None:
    if isinstance(source, str) and lines is MARKED:
        assert _lines(_unmarked(source)) == _marked(source) != []
        lines = _marked(source)
    assert _lines(source) == lines != []


LOOK_ALIKES = [
    pytest.param(
        "x = 1  # oncely: allow ONC101, ONC102 -- both loops are the vendor SDK's\n",
        id="a-reason-after-several-codes",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101 \u2014 the vendor SDK's reconnect loop\n",
        id="em-dash-from-an-editors-smart-dashes",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101 \u2013 the vendor SDK's reconnect loop\n",
        id="en-dash",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101 -- 再接続はSDKが行う\n",
        id="a-reason-in-another-script",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101 -- see #42\n",
        id="a-reason-citing-an-issue-number",
    ),
    pytest.param(
        "x = 1  # oncely: allow ONC101 -- the vendor loop  # type: ignore[misc]\n",
        id="a-reason-then-another-tools-comment",
    ),
    pytest.param(
        "x = 1  # oncely: allow onc101 -- the vendor loop\n",
        id="lower-case-code-with-a-reason",
    ),
    pytest.param(
        """\
@periodic_task
def refresh():  # oncely: idempotent -- it only overwrites a cache entry
    pass
""",
        id="idempotent-note-is-not-a-suppression",
    ),
    pytest.param(
        'HELP = "# oncely: allow ONC101"\n',
        id="in-a-string-literal",
    ),
    pytest.param(
        'HELP = f"{prefix} # oncely: allow ONC101"\n',
        id="in-an-f-string",
    ),
    pytest.param(
        '''\
def help():
    """Silence it with

        # oncely: allow ONC101
    """
''',
        id="in-a-docstring",
    ),
    pytest.param(
        "x = 1  # noqa: ONC101\n",
        id="a-noqa-comment",
    ),
    pytest.param(
        "# docs: https://oncely.invalid/lint#oncely:allow ONC101\n",
        id="a-url-fragment",
    ),
    pytest.param(
        "# to silence it, write oncely: allow ONC101 and give a reason\n",
        id="prose-mentioning-the-directive",
    ),
]


@pytest.mark.parametrize("source", LOOK_ALIKES)
def test_a_look_alike_does_not_fire(source: str) -> None:
    assert _findings(source) == []


LOOP = "import time\n\nwhile True:  {comment}\n    work()\n    time.sleep(60)\n"


@pytest.mark.parametrize(
    ("comment", "silenced"),
    [
        pytest.param("# oncely: allow ONC101 -- the vendor loop", True, id="reasoned"),
        pytest.param("# oncely: allow ONC101", True, id="unreasoned"),
        pytest.param("# Oncely: ALLOW onc101", True, id="other-case"),
        pytest.param("# oncely: allow ONC102 ONC101 -- both", True, id="space-separated"),
        pytest.param("# oncely: allow ONC101 \u2014 the vendor loop", True, id="em-dash"),
        pytest.param("# noqa: E501  # oncely: allow ONC101", True, id="after-a-noqa"),
        pytest.param("# oncely: allow ONC999, ONC101 -- typo", True, id="beside-an-unknown"),
        pytest.param("# oncely: allow ONC102 -- another rule", False, id="another-code"),
        pytest.param("# oncely: allow -- no code", False, id="no-code"),
        pytest.param("# see https://x.invalid/#oncely:allow ONC101", False, id="url-fragment"),
    ],
)
def test_a_suppression_silences_the_codes_it_names(comment: str, silenced: bool) -> None:
    source = LOOP.format(comment=comment)
    found = [line for line, _, _ in _findings(source, ("ONC101",))]
    assert found == ([] if silenced else [3])
