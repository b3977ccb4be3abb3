"""Which files a run lints: the ``.py`` files under the directories it is given.

Light on purpose (``os`` alone): the engine walks with it, and so does the run manifest on a
warm run, which must find the same files and the same configuration without importing the
engine.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing is not imported: a warm run pays about 5 ms for it
if TYPE_CHECKING:
    from typing import BinaryIO

#: Directories never descended into, wherever they are. The tools' caches hold no source, and
#: change whenever their tool runs: a warm run would otherwise list them again each time.
SKIPPED_DIRS = frozenset(
    {
        *(".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "build", "dist"),
        *(".oncely_cache", ".mypy_cache", ".pytest_cache", ".ruff_cache"),
    }
)


def python_files_under(
    top: str, scanned: list[tuple[str, bool]] | None = None
) -> list[tuple[tuple[str, ...], bool]]:
    """The ``.py`` files under directory ``top``, each as its path's parts below ``top`` and
    whether it is a symlink; sorted as paths are, not descending into symlinked directories
    (as ``Path.rglob``) nor into `SKIPPED_DIRS`. Regular files only, or symlinks to one: a
    ``*.py`` that is a FIFO, a device or a link to one (``/dev/zero``) would hang the run or
    exhaust its memory.

    A directory that cannot be listed is passed over. With ``scanned``, each directory the walk
    tried to list is appended to it, with whether it could.
    """
    found: list[tuple[tuple[str, ...], bool]] = []
    folders: list[tuple[str, tuple[str, ...]]] = [(top, ())]
    while folders:
        folder, parts = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    name = entry.name
                    if name.endswith(".py") and _is_file(entry):
                        found.append(((*parts, name), entry.is_symlink()))
                    elif name not in SKIPPED_DIRS and _is_dir(entry) and not entry.is_symlink():
                        folders.append((entry.path, (*parts, name)))
        except OSError:
            if scanned is not None:
                scanned.append((folder, False))
            continue
        if scanned is not None:
            scanned.append((folder, True))
    found.sort()
    return found


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()  # through a symlink: a link to a regular file is one
    except OSError:
        return False


def is_regular(path: str) -> bool:
    """Whether ``path`` is a regular file, or a symlink to one."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def nonblocking(path: str, flags: int) -> int:
    """An ``open()`` opener that does not wait: a FIFO put in a file's place opens at once."""
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def read_regular(file: BinaryIO) -> bytes | None:
    """The bytes of the open ``file``, or None when it is not a regular file (it may have been
    swapped for a FIFO or a device since it was found)."""
    if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
        return None
    return file.read()


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def nearest_pyproject(start: str) -> str | None:
    """The pyproject.toml at or above ``start`` that configures a run there, if any."""
    folder = os.path.realpath(start)
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
