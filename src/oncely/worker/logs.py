"""Log lines of the `oncely run` process: text for people, JSON lines for log shippers.

Structured fields ride on log calls as ``extra={...}`` with the names in `FIELDS`::

    log.error("oncely: %s failed", job, extra={"job": job, "key": key, "attempt": 2})

Text lines append the fields present as ``key=value`` after the message; JSON lines carry them as
members. A field given as None is left out of both.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal, TextIO

FIELDS = ("job", "key", "scheduled_for", "attempt", "worker", "tenant")
"""The structured fields a log call may pass in ``extra``, in the order text lines show them."""

Format = Literal["json", "text"]


def configure_logging(fmt: Format, level: int = logging.INFO, stream: TextIO | None = None) -> None:
    """Send the process's log records to ``stream`` (stderr when None) as ``fmt`` lines.

    Installs one handler on the root logger, so a job's own log lines come out in the same format,
    and sets the root level to ``level``. Calling it again replaces the handler it installed
    before; handlers installed by anyone else are left alone.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _Handler):
            root.removeHandler(handler)
            handler.close()
    handler = _Handler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level)


class _Handler(logging.StreamHandler[TextIO]):
    """The handler `configure_logging` installs, told apart from everyone else's by its type."""


class TextFormatter(logging.Formatter):
    """``2026-03-29T01:00:00.000+00:00 ERROR oncely message job=digest attempt=2``, then any
    traceback on the lines below."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _timestamp(record)

    def formatMessage(self, record: logging.LogRecord) -> str:
        pairs = [f"{name}={_text_value(value)}" for name, value in _fields(record)]
        return " ".join([super().formatMessage(record), *pairs])


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts (ISO 8601, UTC), level, logger, message, the fields present,
    and exc (the formatted traceback) when the record carries an exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update((name, _json_value(value)) for name, value in _fields(record))
        if record.exc_info and record.exc_info[0] is not None:
            line["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line)


def _timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


def _fields(record: logging.LogRecord) -> list[tuple[str, object]]:
    values = ((name, record.__dict__.get(name)) for name in FIELDS)
    return [(name, value) for name, value in values if value is not None]


def _json_value(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _text_value(value: object) -> str:
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    # Quoted only when needed, so that `key=value` pairs still split on spaces.
    if not text or any(c.isspace() or c in '"=' for c in text):
        return json.dumps(text)
    return text
