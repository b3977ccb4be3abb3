"""The lint cache: a file's findings, kept until anything that decides them changes.

An entry's key is the sha256 of the oncely version, the lint code itself, the enabled rules'
codes with their options and allow lists, the file's path relative to the config root and the
file's bytes; a key that matches means the same rules would see the same file where they saw it
before, so its findings are reused and the file is not parsed. Entries live in one JSON document,
``<config root>/.oncely_cache/lint/findings.json``, one entry per path: editing a file replaces
its entry, and entries of files that no longer exist are dropped when the document is saved.

A cache is a speed-up, never a source of truth: a missing, unreadable or foreign document is an
empty cache, and one that cannot be written costs the next run its speed, not its findings.
Concurrent runs may overwrite each other's document; the loser's entries are simply recomputed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from oncely.lint.config import LintConfig
from oncely.lint.finding import Finding
from oncely.lint.rules import Rule

#: Where the cache lives, relative to the config root (the directory of pyproject.toml).
CACHE_DIR = Path(".oncely_cache") / "lint"
_DOCUMENT = "findings.json"
_FORMAT = 1
_LINT_PACKAGE = Path(__file__).resolve().parent


class LintCache:
    """Findings by file, for runs under ``config`` with ``rules`` (what `enabled_rules` gives)."""

    def __init__(self, config: LintConfig, rules: Sequence[Rule]) -> None:
        self.root = config.root
        self.path = config.root / CACHE_DIR / _DOCUMENT
        self._settings = _settings_digest(config, rules)
        self._entries: dict[str, dict[str, Any]] = _read(self.path)
        self._changed = False

    def key(self, relative: str, data: bytes) -> str:
        """The key of the file at ``relative`` (to the config root) whose bytes are ``data``."""
        digest = hashlib.sha256(self._settings)
        for part in (relative.encode(), data):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
        return digest.hexdigest()

    def get(self, relative: str, key: str, shown: str) -> list[Finding] | None:
        """The findings stored for the file at ``relative`` under ``key``, reported under
        ``shown``; None when its entry is missing or has another key.

        The path is not stored: the same file is shown relative to wherever a run starts.
        """
        entry = self._entries.get(relative)
        if entry is None or entry.get("key") != key:
            return None
        return _findings(entry.get("findings"), shown)

    def put(self, relative: str, key: str, findings: Sequence[Finding]) -> None:
        """Store ``findings`` of the file at ``relative`` under ``key``, replacing its old entry."""
        self._entries[relative] = {
            "key": key,
            "findings": [[f.line, f.col, f.code, f.message] for f in findings],
        }
        self._changed = True

    def save(self) -> None:
        """Write the document if anything changed (atomically; failures are ignored)."""
        if not self._changed:
            return
        entries = {
            relative: entry
            for relative, entry in sorted(self._entries.items())
            if (self.root / relative).is_file()
        }
        document = json.dumps({"format": _FORMAT, "entries": entries}, separators=(",", ":"))
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            ignore = self.path.parent.parent / ".gitignore"
            if not ignore.exists():
                # Keeps the cache out of version control even where .gitignore does not say so.
                ignore.write_text("# Created by oncely lint.\n*\n")
            handle, scratch = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    out.write(document)
                os.replace(scratch, self.path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(scratch)
        self._changed = False


def _settings_digest(config: LintConfig, rules: Sequence[Rule]) -> bytes:
    settings = {
        "format": _FORMAT,
        "oncely": oncely_version(),
        "lint": _lint_code_digest(),
        "rules": [
            [rule.code, dict(rule.options), list(config.allow.get(rule.code, ()))]
            for rule in sorted(rules, key=lambda rule: rule.code)
        ],
        # The engine reports these two itself when enabled, whichever rules run.
        "engine": [config.enabled(code) for code in ("ONC000", "ONC001")],
    }
    return json.dumps(settings, sort_keys=True, default=repr).encode()


def oncely_version() -> str:
    """The installed oncely's version ('unknown' when run from a source tree not installed)."""
    try:
        return metadata.version("oncely")
    except metadata.PackageNotFoundError:
        return "unknown"


def _lint_code_digest() -> str:
    # An edited rule in a development checkout keeps the version number; without this its
    # stale findings would be served until the version changed.
    digest = hashlib.sha256()
    for source in sorted(_LINT_PACKAGE.rglob("*.py")):
        digest.update(source.relative_to(_LINT_PACKAGE).as_posix().encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict) or document.get("format") != _FORMAT:
        return {}
    entries = document.get("entries")
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(v, dict)}


def _findings(stored: Any, shown: str) -> list[Finding] | None:
    try:
        return [
            Finding(shown, int(line), int(col), str(code), str(message))
            for line, col, code, message in stored
        ]
    except (TypeError, ValueError):
        return None
