"""Payloads to JSON text and back, bounded: what one process stores, every process can read.

A payload is refused when written if it is nested deeper than `MAX_PAYLOAD_DEPTH` or its JSON
text is longer than `MAX_PAYLOAD_BYTES`. A stored payload that does not read (written past
these checks: by hand, by an older release) decodes to `Unreadable`, never to an exception:
one such row stops its own occurrence, and no worker or listing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from oncely.errors import InvalidPayload

#: Lists and dicts inside one another, at most. Decoding recurses once per level, and a reader
#: with less recursion room than the writer (Python 3.11 reading what 3.12 wrote, a handler deep
#: in its own stack) failed at about 1,000 levels: this leaves every reader ten times the room.
MAX_PAYLOAD_DEPTH = 100
#: Bytes of the stored JSON text (non-ASCII characters are stored as ``\\uXXXX`` escapes): every
#: claim reads its payload, and every listing of schedules reads theirs.
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A stored payload that does not decode; ``reason`` says why."""

    reason: str


def encode(payload: Any) -> str:
    """``payload`` as JSON text; raise `InvalidPayload` naming what cannot be stored.

    Refused on both stores alike: what JSON cannot encode, nesting deeper than
    `MAX_PAYLOAD_DEPTH`, text longer than `MAX_PAYLOAD_BYTES`, and strings PostgreSQL's jsonb
    refuses (a NUL character, half a surrogate pair), which SQLite would have kept.
    """
    _walk(payload)  # before encoding: a 100 MB string is refused without being copied twice
    try:
        text = _ENCODER.encode(payload)
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(
            f"the payload cannot be stored as JSON ({exc}); pass dicts, lists, strings, numbers, "
            "booleans or None"
        ) from exc
    if len(text) > MAX_PAYLOAD_BYTES:
        raise _too_big(len(text))
    return text


# Made once: json.dumps with options builds an encoder per call, a third of encoding a small
# payload.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), sort_keys=True)


def decode(text: str | bytes) -> Any:
    """The payload stored as ``text``, or `Unreadable` with the reason: never raises."""
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("utf-8", "replace")
    depth = _depth(text)
    if depth > MAX_PAYLOAD_DEPTH:
        return Unreadable(
            f"the stored payload is nested {depth} deep, more than {MAX_PAYLOAD_DEPTH}"
        )
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Unreadable(f"the stored payload is not JSON ({type(exc).__name__}: {exc})")


def _walk(payload: Any) -> None:
    """Raise `InvalidPayload` for nesting, size or strings no store can keep. Walked with a stack,
    not recursion; a cycle is nesting without end, refused at the bound."""
    stack: list[tuple[Any, int]] = [(payload, 1)]
    size = 0  # a lower bound of the encoded length: every string's characters
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            size += len(value)
            if size > MAX_PAYLOAD_BYTES:
                raise _too_big(size, at_least=True)
            why = _unstorable(value)
            if why is not None:
                raise InvalidPayload(f"the payload cannot be stored: a string in it holds {why}")
        elif isinstance(value, dict | list | tuple):
            if depth > MAX_PAYLOAD_DEPTH:
                raise InvalidPayload(
                    f"the payload is nested deeper than {MAX_PAYLOAD_DEPTH} lists and dicts "
                    "(MAX_PAYLOAD_DEPTH); flatten it, or store it elsewhere and pass its id"
                )
            if isinstance(value, dict):
                stack.extend((key, depth) for key in value)
                stack.extend((item, depth + 1) for item in value.values())
            else:
                stack.extend((item, depth + 1) for item in value)


def _unstorable(text: str) -> str | None:
    if "\x00" in text:
        return "a NUL character"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "half of a surrogate pair, which is not text"
    return None


def _too_big(size: int, *, at_least: bool = False) -> InvalidPayload:
    return InvalidPayload(
        f"the payload is {'more than ' if at_least else ''}{size} bytes as JSON; a payload holds "
        f"at most {MAX_PAYLOAD_BYTES} (MAX_PAYLOAD_BYTES): store the data elsewhere and pass its id"
    )


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def _depth(text: str) -> int:
    """How deep the lists and dicts of JSON ``text`` nest (its strings aside), without
    recursion; text with fewer brackets than the bound is not scanned."""
    if text.count("[") + text.count("{") <= MAX_PAYLOAD_DEPTH:
        return 0
    depth = deepest = 0
    for char in _NOT_BRACKETS.sub("", _STRINGS.sub("", text)):
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
