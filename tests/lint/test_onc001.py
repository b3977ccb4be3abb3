"""ONC001, a file Python would refuse: its disguises fire (and never crash the run), its
look-alikes do not."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from oncely.cli import main
from oncely.lint import LintConfig, lint_files, lint_source, read_config
from oncely.lint.rules.onc001_syntax_error import SyntaxErrorInFile

RULE = SyntaxErrorInFile
BOM = b"\xef\xbb\xbf"
#: The expected line is the one marked ``# fires``.
MARKED = None
#: The tokenizer refuses more than 200 nested brackets (a SyntaxError); CPython's parser gives up
#: on the long unary chain with a MemoryError instead.
TOO_MANY_BRACKETS = "x = " + "(" * 201 + "1" + ")" * 201 + "\n"
TOO_DEEP_FOR_THE_PARSER = "x = " + "-" * 100_000 + "1\n"


def _findings(source: str | bytes) -> list[tuple[int, int, str]]:
    config = LintConfig(root=Path("/nonexistent"), select=("ONC001",))
    return [(f.line, f.col, f.message) for f in lint_source(Path("m.py"), source, config)]


def _lines(source: str | bytes) -> list[int]:
    return [line for line, _, _ in _findings(source)]


def _marked(source: str | bytes) -> list[int]:
    text = source.decode("latin-1") if isinstance(source, bytes) else source
    return [n for n, line in enumerate(text.splitlines(), 1) if line.endswith("# fires")]


def test_the_violating_example_fires_at_its_line_and_the_clean_one_does_not() -> None:
    assert _lines(RULE.violating) == [1]
    assert _findings(RULE.clean) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        pytest.param(
            "name = 'café' $\n",
            (1, 16, "syntax error, file not checked: invalid syntax"),
            id="column-counted-in-bytes",
        ),
        pytest.param(
            "x = 1\ny = 'a\0b'\n",
            (2, 7, "syntax error, file not checked: source code cannot contain null bytes"),
            id="null-byte",
        ),
        pytest.param(
            b"x = 1\n# caf\xe9\n",
            (
                2,
                6,
                "syntax error, file not checked: byte 0xe9 is not utf-8; save the file as UTF-8 "
                "or declare its encoding (PEP 263)",
            ),
            id="latin-1-byte-in-a-utf-8-file",
        ),
        pytest.param(
            TOO_DEEP_FOR_THE_PARSER,
            (1, 1, "syntax error, file not checked: too deeply nested for Python's parser"),
            id="too-deep-for-the-parser",
        ),
    ],
)
def test_the_message_says_why_and_where(source: str | bytes, found: tuple[int, int, str]) -> None:
    assert _findings(source) == [found]


DISGUISES = [
    pytest.param(
        "x = (1,  # fires\n    2,\n",
        MARKED,
        id="bracket-unclosed-at-the-end-of-the-file",
    ),
    pytest.param(
        "if ready:\n\tif set:\n        go()  # fires\n",
        MARKED,
        id="tabs-and-spaces-mixed-taberror",
    ),
    pytest.param(
        "def f():\nreturn 1  # fires\n",
        MARKED,
        id="missing-indentation",
    ),
    pytest.param(
        "x = 1\n    y = 2  # fires\n",
        MARKED,
        id="unexpected-indentation",
    ),
    pytest.param(
        'print "hello"  # fires\n',
        MARKED,
        id="python-2-print-statement",
    ),
    pytest.param(
        "try:\n    go()\nexcept ValueError, exc:  # fires\n    pass\n",
        MARKED,
        id="python-2-except-comma",
    ),
    pytest.param(
        'x = 1\ny = f"{x!}"  # fires\n',
        MARKED,
        id="f-string-bad-conversion",
    ),
    pytest.param(
        'y = f"{"nested"}"  # fires\n',
        MARKED,
        id="f-string-reusing-its-quotes-python-3-12-only",
    ),
    pytest.param(
        "async = True  # fires\n",
        MARKED,
        id="async-as-a-name",
    ),
    pytest.param(
        "def f():\n    x := 1  # fires\n",
        MARKED,
        id="walrus-as-a-statement",
    ),
    pytest.param(
        "type Seconds = int  # fires\n",
        MARKED,
        id="pep-695-type-alias-python-3-12-only",
    ),
    pytest.param(
        "def first[T](items: list[T]) -> T:  # fires\n    return items[0]\n",
        MARKED,
        id="pep-695-generic-function-python-3-12-only",
    ),
    pytest.param(
        'x = 1\ny = """never\nclosed\n\nz = 2\n',
        [2],  # where it opens, as Python reports it (it is detected at line 5)
        id="unterminated-triple-quoted-string",
    ),
    pytest.param(
        "x = 1\ny = (",
        [2],
        id="error-on-the-last-line-without-a-newline",
    ),
    pytest.param(
        b"x = 1\ny = 'a\0b'  # fires\n",
        MARKED,
        id="null-byte-in-the-bytes",
    ),
    pytest.param(
        b"x = 1\n# caf\xe9  # fires\n",
        MARKED,
        id="invalid-utf-8-in-a-comment",
    ),
    pytest.param(
        b"# caf\xe9 on the first line  # fires\nx = 1\n",
        MARKED,
        id="invalid-utf-8-on-the-first-line",
    ),
    pytest.param(
        b"# -*- coding: ascii -*-\nname = 'caf\xc3\xa9'  # fires\n",
        MARKED,
        id="utf-8-bytes-under-an-ascii-cookie",
    ),
    pytest.param(
        b"#!/usr/bin/env python\n# -*- coding: klingon -*-  # fires\nx = 1\n",
        MARKED,
        id="unknown-encoding-in-the-cookie",
    ),
    pytest.param(
        BOM + b"# -*- coding: latin-1 -*-  # fires\nx = 1\n",
        MARKED,
        id="byte-order-mark-against-a-latin-1-cookie",
    ),
    pytest.param(
        BOM + b"x = 1\ndef broken(:  # fires\n    pass\n",
        MARKED,
        id="byte-order-mark-and-a-syntax-error",
    ),
    pytest.param(
        b"x = 1\r\ny = (\r\n",
        [2],
        id="crlf-line-ends-and-an-unclosed-bracket",
    ),
    pytest.param(TOO_MANY_BRACKETS, [1], id="more-than-200-nested-brackets"),
    pytest.param(TOO_DEEP_FOR_THE_PARSER, [1], id="nesting-the-parser-gives-up-on"),
]


@pytest.mark.parametrize(("source", "lines"), DISGUISES)
def test_a_file_python_would_refuse_is_one_finding(
    source: str | bytes, lines: list[int] | None
) -> None:
    expected = _marked(source) if lines is MARKED else lines
    assert _lines(source) == expected
    assert len(expected) == 1


LOOK_ALIKES = [
    pytest.param(
        "match command.split():\n    case [action]:\n        go(action)\n    case _:\n"
        "        pass\n",
        id="match-statement",
    ),
    pytest.param(
        "match = 1\ncase = 2\ntype = 3\nprint(match, case, type)\n",
        id="soft-keywords-as-names",
    ),
    pytest.param(
        "def call(*args: *Ts) -> tuple[*Ts]:\n    return args\n\nx = grid[*index]\n",
        id="pep-646-star-expressions",
    ),
    pytest.param(
        "try:\n    go()\nexcept* ValueError:\n    pass\n",
        id="except-star",
    ),
    pytest.param(
        "import sys\n\nprint >> sys.stderr, 'hello'\nprint = log.info\n",
        id="python-2-print-chevron-parses-as-an-expression",
    ),
    pytest.param(
        "x = " + "(" * 150 + "1" + ")" * 150 + "\n",
        id="deeply-nested-but-valid-brackets",
    ),
    pytest.param(
        "import os\n\x0c\ndef f():\n    pass\n\x0c\nclass C:\n    pass\n",
        id="form-feeds-between-sections",
    ),
    pytest.param(b"import os\r\n\r\ndef f():\r\n    pass\r\n", id="crlf-line-ends"),
    pytest.param(b"import os\r\rdef f():\r    pass\r", id="old-mac-cr-line-ends"),
    pytest.param("# only\n# comments\n", id="only-comments"),
    pytest.param("", id="empty-file"),
    pytest.param(b"", id="empty-bytes"),
    pytest.param("x = 1", id="no-newline-at-the-end"),
    pytest.param(BOM + b"import os\n", id="byte-order-mark"),
    pytest.param(
        BOM + b"# -*- coding: utf-8 -*-\nname = 'caf\xc3\xa9'\n", id="bom-and-utf-8-cookie"
    ),
    pytest.param(b"# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n", id="latin-1-cookie-and-bytes"),
    pytest.param("café = 'naïve'\n", id="non-ascii-names"),
    pytest.param(
        'pattern = "\\d+"\n',
        id="invalid-escape-is-a-warning-not-an-error-even-under-w-error",
    ),
    pytest.param(
        "return 1\nawait job()\nbreak\n",
        # The compiler rejects these, the parser does not: every rule checks such a file, so
        # it is no ONC001 (pyflakes-style rules would name them).
        id="compiler-only-errors-parse",
    ),
]


@pytest.mark.parametrize("source", LOOK_ALIKES)
def test_a_file_python_reads_does_not_fire(source: str | bytes) -> None:
    assert _findings(source) == []


def test_a_file_python_refuses_never_stops_the_run(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.oncely.lint]\n")
    files = {
        "a_syntax.py": b"def broken(:\n",
        "b_null.py": b"x = 1\0\n",
        "c_latin.py": b"# caf\xe9\n",
        "d_deep.py": TOO_DEEP_FOR_THE_PARSER.encode(),
        "e_cookie.py": b"# coding: klingon\n",
        "f_loop.py": b"import time\n\nwhile True:\n    work()\n    time.sleep(60)\n",
        "g_clean.py": b"x = 1\n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    expected = [
        ("a_syntax.py", 1, "ONC001"),
        ("b_null.py", 1, "ONC001"),
        ("c_latin.py", 1, "ONC001"),
        ("d_deep.py", 1, "ONC001"),
        ("e_cookie.py", 1, "ONC001"),
        ("f_loop.py", 3, "ONC101"),
    ]
    findings = lint_files([tmp_path], read_config(tmp_path / "pyproject.toml"))
    assert [(f.path, f.line, f.code) for f in findings] == expected
    result = CliRunner().invoke(main, ["lint", str(tmp_path)])
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        path for path, _, _ in expected
    ]
    assert "Traceback" not in result.output
