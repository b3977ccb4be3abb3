"""The run manifest: a whole run's output, replayed while nothing that decides it has changed.

A warm run (the editor's, the pre-commit hook's: nothing changed since the last one) is
answered from here without importing the engine, the rules, the configuration reader or click:
this module needs ``os``, ``sys`` and ``json`` alone. Anything else falls through to the engine,
which still reuses the per-file cache (``oncely.lint.cache``).

A manifest is kept per command line, ``<config root>/.oncely_cache/lint/run-<crc>.json``, and
replayed when all of these are as they were:

- the key: the working directory and the targets as given (paths are shown, and modules named,
  relative to them), ``--format``, ``--select`` and ``--ignore``, the Python that parsed the
  files (ONC001), the manifest format, the nearest ``pyproject.toml``'s path (where the config
  root is), and for SARIF the installed oncely's version (the log names it);
- the files: every file and directory the run's walk meets, with (size, mtime_ns, inode), as in
  git's index: the targets' ``.py`` files, the directories holding them (a directory's mtime
  moves when an entry is added, removed or renamed in it, so an unchanged one need not be
  listed again, as git's untracked cache has it), the lint package's own code, and the
  ``pyproject.toml``.

The per-file cache's rule for racily clean files is the manifest's too: a run takes the file
system's clock before it reads anything, and a manifest is only written when every stat in it
is older than that clock, and the stats seen after the run equal those seen before it. A file or
directory changed after the clock then has a newer mtime than the manifest holds; one changed
before it was seen by the run itself.

A manifest is sealed with the user's key, as the per-file cache is (``oncely.lint.signing``):
one edited, copied or committed is a miss, never replayed.

Like the per-file cache, a manifest does not see files outside the walk that a rule may read
(a package's ``__init__.py`` elsewhere): ``--no-cache`` neither reads nor writes one.
"""

from __future__ import annotations

import json
import os
import sys

from oncely.lint.discovery import nearest_pyproject, python_files_under
from oncely.version import oncely_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    #: A file or directory as seen: ``[path, size, mtime_ns, inode]``, or ``[path]`` when it
    #: could not be seen (missing, unreadable): never trusted.
    Seen = list[Any]

#: Where the lint caches live, relative to the config root (the directory of pyproject.toml).
CACHE_FOLDER = os.path.join(".oncely_cache", "lint")
_FORMAT = 1
_PREFIX = "run-"
#: Manifests kept in a cache folder (one per command line); the least recently written go.
_KEPT = 16
_LINT_PACKAGE = os.path.dirname(os.path.abspath(__file__))


class RunManifest:
    """One command line's manifest: `replay` it, or else `start` the run and `record` it."""

    def __init__(
        self, targets: Sequence[str], fmt: str, select: str | None, ignore: str | None
    ) -> None:
        cwd = os.getcwd()
        self.targets = list(targets) or [cwd]
        config = nearest_pyproject(self.targets[0])
        root = os.path.dirname(config) if config else os.path.realpath(cwd)
        line = [cwd, list(targets), fmt, select, ignore]
        self.key: dict[str, Any] = {
            "format": _FORMAT,
            "line": line,
            "python": sys.version,
            "config": config,
            "version": oncely_version() if fmt == "sarif" else None,
        }
        self.folder = os.path.join(root, CACHE_FOLDER)
        self.path = os.path.join(self.folder, f"{_PREFIX}{_crc(json.dumps(line)):08x}.json")
        self._roots = [_LINT_PACKAGE, *self.targets]
        self._extra = [config] if config else []
        self._seen: tuple[list[Seen], list[Seen]] | None = None
        self._clock: int | None = None

    def replay(self) -> int | None:
        """Write the stored output and return the stored exit status, when every part of the key
        and every stat is as stored; else None, having looked at the files for `record`."""
        stored = _load(self.path)
        if stored is None and not os.path.isdir(self.folder):
            # Made before the files are seen, not while the run writes its caches: it may be in
            # a directory the run walks, whose mtime would then move under the run.
            import contextlib

            with contextlib.suppress(OSError):  # then no cache is written either
                os.makedirs(self.folder, exist_ok=True)
        elif stored is not None and stored["key"] != self.key:
            stored = None
        self._seen = self._observe(stored)
        if stored is None or list(self._seen) != [stored["dirs"], stored["files"]]:
            return None
        sys.stdout.write(stored["out"])
        sys.stdout.flush()
        if stored["err"]:
            sys.stderr.write(stored["err"])
            sys.stderr.flush()
        status: int = stored["status"]
        return status

    def start(self) -> None:
        """Take the file system's clock: call it after `replay` missed, before the run reads
        anything."""
        from pathlib import Path

        from oncely.lint.cache import file_system_time

        self._clock = file_system_time(Path(self.folder))

    def record(self, out: str, err: str, status: int) -> None:
        """Keep the output the run wrote (``out``, ``err``) and its exit ``status``, when nothing
        changed while it ran and every stat is older than the clock `start` took."""
        if self._clock is None or self._seen is None:
            return
        seen = self._observe(None)
        if seen != self._seen:
            return
        clock = self._clock
        if any(len(entry) != 4 or entry[2] >= clock for entries in seen for entry in entries):
            return
        document: dict[str, Any] = {"key": self.key, "dirs": seen[0], "files": seen[1]}
        document.update(out=out, err=err, status=status)
        from pathlib import Path

        from oncely.lint.cache import write_document
        from oncely.lint.signing import seal

        sealed = seal(json.dumps(document, separators=(",", ":")))
        if sealed is not None:
            write_document(Path(self.path), sealed)
            _prune(self.folder)

    def _observe(self, stored: dict[str, Any] | None) -> tuple[list[Seen], list[Seen]]:
        """The directories and files of the run as they are now. With ``stored`` (a manifest of
        the same key), directories whose stat is unchanged are not listed again."""
        if stored is not None and all(_seen(entry[0]) == entry for entry in stored["dirs"]):
            return stored["dirs"], [_seen(entry[0]) for entry in stored["files"]]
        dirs: list[Seen] = []
        files: list[str] = []
        for root in self._roots:
            if not os.path.isdir(root):
                files.append(root)
                continue
            scanned: list[tuple[str, bool]] = []
            prefix = root.rstrip("/") + "/"
            files.extend(prefix + "/".join(parts) for parts, _ in python_files_under(root, scanned))
            dirs.extend(_seen(folder) if listed else [folder] for folder, listed in scanned)
        dirs.sort()
        return dirs, [_seen(file) for file in [*files, *self._extra]]


def _seen(path: str) -> Seen:
    try:
        status = os.stat(path)
    except OSError:
        return [path]
    return [path, status.st_size, status.st_mtime_ns, status.st_ino]


def _crc(text: str) -> int:
    import zlib  # a file name, not a check: the key inside the manifest is compared in full

    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def _load(path: str) -> dict[str, Any] | None:
    """The manifest at ``path``; None when it is missing, unreadable or not one."""
    from oncely.lint.signing import unseal

    try:
        with open(path, "rb") as file:
            body = unseal(file.read())
        document = json.loads(body) if body is not None else None
    except (OSError, ValueError):
        return None
    shapes = {"key": dict, "dirs": list, "files": list, "out": str, "err": str, "status": int}
    if not isinstance(document, dict) or not all(
        isinstance(document.get(name), kind) for name, kind in shapes.items()
    ):
        return None
    if not all(
        isinstance(entry, list) and entry and isinstance(entry[0], str)
        for entries in (document["dirs"], document["files"])
        for entry in entries
    ):
        return None
    return document


def _prune(folder: str) -> None:
    """Remove all but the `_KEPT` most recently written manifests in ``folder``."""
    try:
        with os.scandir(folder) as entries:
            manifests = [
                (entry.stat().st_mtime_ns, entry.path)
                for entry in entries
                if entry.name.startswith(_PREFIX) and entry.name.endswith(".json")
            ]
    except OSError:
        return
    import contextlib  # a run that writes a manifest imports it anyway

    for _, path in sorted(manifests, reverse=True)[_KEPT:]:
        with contextlib.suppress(OSError):
            os.unlink(path)
