"""The lint caches' seal: what this user's runs wrote is trusted, nothing else.

A cache folder can be copied, committed or edited: a document in it saying "no findings" would
otherwise make a run pass over a real violation. So each document is sealed with keyed BLAKE2b
(a MAC by design, RFC 7693) under a secret key of the user's, kept outside every cache folder:
``$XDG_CONFIG_HOME/oncely/lint-cache.key`` (``~/.config/...``), 32 random bytes, created on first
use, readable by the user alone. A document whose seal does not verify (edited, or written on
another machine or by another user) is an empty cache. Without a key (the folder cannot be
written) nothing is trusted and nothing is sealed.

A sealed document is the seal's hex digest, a line break, and the document's text.

Light on purpose: the run manifest uses it on a warm run, where hmac and hashlib (which loads
OpenSSL) cost about 4 ms of 50; BLAKE2 is hashlib's own C module, imported alone.
"""

from __future__ import annotations

import os

try:
    from _blake2 import blake2b
    from _operator import _compare_digest as compare_digest
except ImportError:  # another Python than CPython
    from hashlib import blake2b
    from hmac import compare_digest  # type: ignore[no-redef]

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


def _mac(key: bytes, body: bytes) -> bytes:
    return blake2b(body, key=key, digest_size=32).hexdigest().encode()


def seal(body: str) -> str | None:
    """The document holding ``body`` under its seal; None without a key."""
    key = _key()
    if key is None:
        return None
    return f"{_mac(key, body.encode('utf-8', 'surrogatepass')).decode()}\n{body}"


def unseal(document: bytes) -> str | None:
    """The body of a document `seal` wrote with this user's key; None for any other."""
    key = _key()
    mac, newline, body = document.partition(b"\n")
    if key is None or not newline or not compare_digest(mac, _mac(key, body)):
        return None
    try:
        return body.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
