"""The lint cache: a file's findings, kept until anything that decides them changes.

An entry holds a file's findings with the digest of the settings they were found under (the
lint code itself, the Python that parsed the file, the enabled rules' codes with their options
and allow lists), the sha256 of the file's bytes, and the module the file was taken for (named
after the path the file is shown under, so after where the run started; ONC201 resolves
imports by it). Its findings are reused when all three match: the same rules would see the
same file as the same module, so it is not parsed. Entries
live in one JSON document, ``<config root>/.oncely_cache/lint/findings.json``, one entry per path
relative to the config root: editing a file replaces its entry, and entries of files that no
longer exist are dropped when the document is saved.

An entry also keeps the file's (size, mtime_ns, inode) as they were when it was read. A file
whose stat still equals them is taken to hold the bytes it held then and is not read at all, as
git's index does; any other file is read and its sha256 compared. A file changed within the
same tick of the file system's clock as it was read can keep its stat (the "racily clean"
problem): so a stat is only recorded when the file's mtime is older than the file system's
time just before the file was read (the mtime of a file created then beside the cache: the
linted files are taken to share that clock, as git takes a work tree to share its index's); a
later write then moves the mtime. A file changed since is simply read again.

A cache is a speed-up, never a source of truth: a missing, unreadable or foreign document is an
empty cache, and one that cannot be written costs the next run its speed, not its findings. The
document is sealed with the user's key (``oncely.lint.signing``): one edited, copied from
another machine or committed to the repository does not verify, and is an empty cache. The
settings digest also holds oncely's version.
Concurrent runs may overwrite each other's document; the loser's entries are simply recomputed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oncely.lint.config import LintConfig
from oncely.lint.discovery import nonblocking, read_regular
from oncely.lint.finding import Finding
from oncely.lint.manifest import CACHE_FOLDER
from oncely.lint.rules.base import module_name
from oncely.lint.signing import seal, unseal
from oncely.version import oncely_version

#: Where the cache lives, relative to the config root (the directory of pyproject.toml).
CACHE_DIR = Path(CACHE_FOLDER)
_DOCUMENT = "findings.json"
_FORMAT = 4
_LINT_PACKAGE = Path(__file__).resolve().parent


class LintCache:
    """Findings by file, for runs under ``config`` of the rules ``codes`` (what `enabled_codes`
    gives)."""

    def __init__(self, config: LintConfig, codes: Sequence[str]) -> None:
        self.root = config.root
        self.path = config.root / CACHE_DIR / _DOCUMENT
        self._settings = _settings_digest(config, codes)
        self._entries: dict[str, dict[str, Any]] = _load(self.path)
        # What `get` read of each file it could not trust: its stat (None when too recent to
        # trust) and digest, for `put`.
        self._reads: dict[str, tuple[list[int] | None, str, str]] = {}
        self._seen: set[str] = set()
        self._clock: int | None = None
        self._clock_read = False
        self._changed = False

    def get(self, relative: str, path: str, shown: str) -> list[Finding] | bytes:
        """The findings stored for the file at ``path`` (``relative`` to the config root),
        reported under ``shown``; when it holds none for the file as it is now, the file's
        bytes, to lint and `put`.

        The path is not stored: the same file is shown relative to wherever a run starts. The
        module that path names is (`module_name`: rules resolve imports and boundaries by it),
        and a file shown as another module is linted again.
        Raises `OSError` when the file cannot be read.
        """
        self._seen.add(relative)
        status = os.stat(path)
        stat = [status.st_size, status.st_mtime_ns, status.st_ino]
        entry = self._entries.get(relative, {})
        module = module_name(shown)
        current = entry.get("settings") == self._settings and entry.get("module") == module
        if current and entry.get("stat") == stat:
            findings = _findings(entry.get("findings"), shown)
            if findings is not None:
                return findings
        if not self._clock_read:
            self._clock, self._clock_read = file_system_time(self.path.parent), True
        with open(path, "rb", opener=nonblocking) as file:
            read = read_regular(file)
        if read is None:
            return []  # swapped for a FIFO or a device since it was found: nothing to lint
        data = read
        digest = hashlib.sha256(data).hexdigest()
        # Racily clean: a stat no older than the clock before the read can survive a write
        # made after the read, within the same tick; such a file is read again next time.
        trusted = self._clock is not None and status.st_mtime_ns < self._clock
        self._reads[relative] = (stat if trusted else None, digest, module)
        if current and entry.get("digest") == digest:
            findings = _findings(entry.get("findings"), shown)
            if findings is not None:
                if entry.get("stat") != self._reads[relative][0]:
                    self.put(relative, findings)  # touched, not changed: next time, not read
                return findings
        return data

    def put(self, relative: str, findings: Sequence[Finding]) -> None:
        """Store ``findings`` of the file at ``relative``, as `get` last read it, replacing its
        old entry."""
        stat, digest, module = self._reads[relative]
        self._entries[relative] = {
            "settings": self._settings,
            "module": module,
            "digest": digest,
            "stat": stat,
            "findings": [
                [f.line, f.col, f.code, f.message, f.justification, f.level] for f in findings
            ],
        }
        self._changed = True

    def save(self) -> None:
        """Write the document if anything changed (atomically; failures are ignored)."""
        if not self._changed:
            return
        entries = {
            relative: entry
            for relative, entry in sorted(self._entries.items())
            if relative in self._seen or os.path.isfile(os.path.join(self.root, relative))
        }
        body = json.dumps({"format": _FORMAT, "entries": entries}, separators=(",", ":"))
        document = seal(body)
        if document is not None:
            write_document(self.path, document)
        self._changed = False


def write_document(path: Path, text: str) -> None:
    """Replace the file at ``path`` (in the cache folder) with ``text``, atomically: readers see
    the old document or the new one. A failure is ignored: the cache is only a speed-up."""
    with contextlib.suppress(OSError):
        _prepare(path.parent)
        handle, scratch = _scratch_file(path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(scratch, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(scratch)


def _prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder.parent / ".gitignore"
    if not ignore.exists():
        # Keeps the cache out of version control even where .gitignore does not say so.
        ignore.write_text("# Created by oncely lint.\n*\n")


def _scratch_file(folder: Path) -> tuple[int, str]:
    import tempfile  # only runs that write pay for importing it

    return tempfile.mkstemp(dir=folder, suffix=".tmp")


def file_system_time(folder: Path) -> int | None:
    """The file system's clock now, in ns: the mtime of a file created in ``folder`` for the
    purpose (file times come from the file system's clock, and its ticks, not the process's).
    None when the folder cannot be written: nothing will be saved then either."""
    try:
        _prepare(folder)
        handle, scratch = _scratch_file(folder)
    except OSError:
        return None
    try:
        return os.fstat(handle).st_mtime_ns
    finally:
        os.close(handle)
        with contextlib.suppress(OSError):
            os.unlink(scratch)


def _settings_digest(config: LintConfig, codes: Sequence[str]) -> str:
    settings = {
        "format": _FORMAT,
        "lint": _lint_code_digest(),
        "oncely": oncely_version(),
        "python": _python_version(),
        "rules": [
            [code, config.options.get(code) or {}, list(config.allow.get(code, ()))]
            for code in sorted(codes)
        ],
        # The engine reports these itself when enabled, whichever rules run.
        "engine": [config.enabled(code) for code in ("ONC000", "ONC001", "ONC002")],
        "target": config.target_version,
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=repr).encode()).hexdigest()


def _python_version() -> str:
    # A newer Python parses syntax an older one rejects (ONC001).
    return ".".join(map(str, sys.version_info[:3]))


def _lint_code_digest() -> str:
    # The lint code itself, not oncely's version: an edited rule in a development checkout
    # keeps the version number, and a new version whose lint code is the same finds the same.
    digest = hashlib.sha256()
    for source in sorted(_LINT_PACKAGE.rglob("*.py")):
        digest.update(source.relative_to(_LINT_PACKAGE).as_posix().encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def _load(path: Path) -> dict[str, dict[str, Any]]:
    try:
        with open(path, "rb") as file:
            body = unseal(file.read())
        document = json.loads(body) if body is not None else None
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
            Finding(
                shown,
                int(line),
                int(col),
                str(code),
                str(message),
                None if justification is None else str(justification),
                str(level),
            )
            for line, col, code, message, justification, level in stored
        ]
    except (TypeError, ValueError):
        return None
