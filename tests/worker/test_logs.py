"""configure_logging: JSON lines that parse, text lines with key=value fields, installed once."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from oncely.worker.logs import FIELDS, configure_logging

SCHEDULED_FOR = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
EXTRA = {
    "job": "digest",
    "key": "digest:daily",
    "scheduled_for": SCHEDULED_FOR,
    "attempt": 2,
    "worker": "web-1#4242",
    "tenant": "acme",
}


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """Where the configured handler writes; the root logger is put back as it was after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield io.StringIO()
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def test_json_lines_parse_and_carry_the_fields(stream: io.StringIO) -> None:
    configure_logging("json", stream=stream)
    logging.getLogger("oncely").warning("oncely: %s retrying", "digest", extra=EXTRA)
    (line,) = stream.getvalue().splitlines()
    record = json.loads(line)
    ts = datetime.fromisoformat(record.pop("ts"))
    assert ts.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - ts) < timedelta(minutes=1)
    assert record == {
        "level": "WARNING",
        "logger": "oncely",
        "message": "oncely: digest retrying",
        "job": "digest",
        "key": "digest:daily",
        "scheduled_for": "2026-03-29T01:00:00+00:00",
        "attempt": 2,
        "worker": "web-1#4242",
        "tenant": "acme",
    }
    assert set(EXTRA) == set(FIELDS)


def test_json_carries_the_traceback_on_the_same_line(stream: io.StringIO) -> None:
    configure_logging("json", stream=stream)
    log = logging.getLogger("oncely.engine")
    try:
        raise ValueError("bad\npayload")
    except ValueError:
        log.exception("oncely: digest failed", extra={"job": "digest", "tenant": None})
    log.error("oncely: no exception here", exc_info=True)  # outside an except: nothing to show
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["logger"] == "oncely.engine"
    assert first["level"] == "ERROR"
    assert first["exc"].startswith("Traceback (most recent call last):")
    assert first["exc"].endswith("ValueError: bad\npayload")
    assert first["job"] == "digest"
    assert "tenant" not in first  # None is left out
    assert "exc" not in second


def test_text_lines_append_the_fields_as_key_value_pairs(stream: io.StringIO) -> None:
    configure_logging("text", stream=stream)
    log = logging.getLogger("oncely")
    log.info("oncely: ran", extra=EXTRA)
    log.info("oncely: quoted", extra={"key": 'remind "user" 42', "tenant": "", "worker": "a=b"})
    log.info("oncely: plain")
    ran, quoted, plain = stream.getvalue().splitlines()
    ts, level, logger, message = ran.split(" ", 3)
    assert datetime.fromisoformat(ts).utcoffset() == timedelta(0)
    assert (level, logger) == ("INFO", "oncely")
    assert message == (
        "oncely: ran job=digest key=digest:daily scheduled_for=2026-03-29T01:00:00+00:00 "
        "attempt=2 worker=web-1#4242 tenant=acme"
    )
    assert quoted.endswith(r'oncely: quoted key="remind \"user\" 42" worker="a=b" tenant=""')
    assert plain.endswith("INFO oncely oncely: plain")


def test_text_puts_the_traceback_below_the_fields(stream: io.StringIO) -> None:
    configure_logging("text", stream=stream)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("oncely").exception("oncely: tick failed", extra={"worker": "w#1"})
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("ERROR oncely oncely: tick failed worker=w#1")
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-1] == "RuntimeError: boom"


def test_configuring_again_replaces_its_own_handler_only(stream: io.StringIO) -> None:
    root = logging.getLogger()
    others = list(root.handlers)
    earlier = io.StringIO()
    configure_logging("text", stream=earlier)
    configure_logging("json", level=logging.WARNING, stream=stream)
    assert len(root.handlers) == len(others) + 1
    assert all(handler in root.handlers for handler in others)
    assert root.level == logging.WARNING

    logging.getLogger("oncely").info("oncely: below the level")
    logging.getLogger("oncely").warning("oncely: once")
    assert earlier.getvalue() == ""
    assert [json.loads(line)["message"] for line in stream.getvalue().splitlines()] == [
        "oncely: once"
    ]
