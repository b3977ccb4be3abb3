"""The lint caches' seal: what this user's runs wrote is trusted, nothing else.

A cache folder can be copied, committed or edited: a document in it saying "no findings" would
otherwise make a run pass over a real violation. So each document is sealed with an HMAC-SHA256
under a secret key of the user's, kept outside every cache folder:
``$XDG_CONFIG_HOME/oncely/lint-cache.key`` (``~/.config/...``), 32 random bytes, created on first
use, readable by the user alone. A document whose seal does not verify (edited, or written on
another machine or by another user) is an empty cache. Without a key (the folder cannot be
written) nothing is trusted and nothing is sealed.

Light on purpose (``os``, ``hmac``, ``hashlib``): the run manifest uses it on a warm run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os

_KEY_BYTES = 32
_key_cache: dict[str, bytes | None] = {}


def key_path() -> str:
    """Where the user's key is: under ``$XDG_CONFIG_HOME`` (default ``~/.config``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "oncely", "lint-cache.key")


def _key() -> bytes | None:
    path = key_path()
    if path not in _key_cache:
        _key_cache[path] = _read_or_create(path)
    return _key_cache[path]


def _read_or_create(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            key = file.read()
        return key if len(key) == _KEY_BYTES else None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        scratch = f"{path}.{os.getpid()}.tmp"
        handle = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(handle, os.urandom(_KEY_BYTES))
        finally:
            os.close(handle)
        try:
            os.link(scratch, path)  # atomic, and refuses to replace a key another run made
        except FileExistsError:
            pass
        finally:
            os.unlink(scratch)
        with open(path, "rb") as file:
            key = file.read()
    except OSError:
        return None
    return key if len(key) == _KEY_BYTES else None


def seal(body: str) -> str | None:
    """A document holding ``body`` (JSON text) and its seal; None without a key."""
    key = _key()
    if key is None:
        return None
    mac = hmac.new(key, body.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return json.dumps({"mac": mac, "body": body}, separators=(",", ":"))


def unseal(document: bytes) -> str | None:
    """The body of a document `seal` wrote with this user's key; None for any other."""
    key = _key()
    if key is None:
        return None
    try:
        outer = json.loads(document)
    except ValueError:
        return None
    if not isinstance(outer, dict):
        return None
    mac, body = outer.get("mac"), outer.get("body")
    if not isinstance(mac, str) or not isinstance(body, str):
        return None
    wanted = hmac.new(key, body.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return body if hmac.compare_digest(mac, wanted) else None
