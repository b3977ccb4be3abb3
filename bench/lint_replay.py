"""ONC002 on real code evolution: suppressions written at an older commit, carried by git to a
later one, and the ones that went stale there.

``bench/lint_replay.txt`` lists, per project, an older and a later commit of its history and the
suppressions a maintainer adopting ``oncely lint`` at the older one would write: one
``path:line CODE -- reason`` per finding that is a justified exception there (or a false alarm
they silenced). A project line ending in ``oncely=<revision>`` has the older commit linted by
oncely as it was at that revision of this repository (its ``src`` extracted under ``--root``),
so the same code can be replayed across a linter upgrade. For each project:

1. the older commit is linted as bench/lint_corpus.py lints a corpus project (same
   ``bench/lint_corpus_config/<owner+name>.toml``); each listed suppression must name a finding
   reported there;
2. a commit on top of it appends ``# oncely: allow CODE -- reason`` to those lines, and
   ``git merge-tree`` merges it with the later commit, as a rebase would: a suppression travels
   with its line, through edits and renames around it; a file whose merge conflicts keeps the
   later commit's text, and each of its suppressions goes back on the line that reads as its
   old line did (by its context when several do), as a person resolving the conflict would
   put it, or is dropped when no line does (its code was rewritten or removed);
3. the merged tree is linted: its ONC002 findings are the suppressions that silence nothing any
   more, matched against ``bench/lint_replay_judged.txt`` (the corpus's judgment format).

Everything fetched stays outside the repository: a ``--shared`` bare clone of each mirror and
the materialised trees go under ``--root``/replay. Run from the project root::

    .venv/bin/python bench/lint_replay.py           # per project: written, carried, stale
    .venv/bin/python bench/lint_replay.py --list    # and every finding at both commits
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lint_corpus import (
    CONFIGS,
    ROOT,
    Found,
    Project,
    lint,
    project_config,
    read_judged,
    verdict_table,
)

REPLAY = ROOT / "bench" / "lint_replay.txt"
JUDGED = ROOT / "bench" / "lint_replay_judged.txt"
MARK = "# oncely: allow"


@dataclass(frozen=True)
class Allow:
    path: str
    line: int
    code: str
    reason: str


@dataclass
class Replay:
    repo: str
    old: str
    new: str
    #: The oncely revision (of this repository) that linted the older commit; None: this one.
    oncely: str | None = None
    allows: list[Allow] = field(default_factory=list)

    @property
    def folder(self) -> str:
        return self.repo.replace("/", "+")


def read_replay(path: Path) -> list[Replay]:
    replays: list[Replay] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            repo, old, new, *rest = line.split()
            version = rest[0].removeprefix("oncely=") if rest else None
            replays.append(Replay(repo, old, new, version))
            continue
        head, _, reason = line.partition(" -- ")
        where, code = head.split()
        file, _, at = where.rpartition(":")
        if not replays or not reason.strip():
            raise SystemExit(f"{path}:{number}: a suppression needs a project above and a reason")
        replays[-1].allows.append(Allow(file, int(at), code, reason.strip()))
    return replays


def git(git_dir: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> bytes:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "replay",
        "GIT_AUTHOR_EMAIL": "replay@localhost",
        "GIT_COMMITTER_NAME": "replay",
        "GIT_COMMITTER_EMAIL": "replay@localhost",
    }
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], input=stdin, capture_output=True, env=env
    )
    if check and done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.decode(errors='replace')}")
    return done.stdout


def old_oncely(revision: str, root: Path) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run oncely as it was at ``revision``: its ``src`` from
    this repository's history under ``root``, on this venv's Python and dependencies."""
    target = root / f"oncely@{revision[:12]}"
    if not (target / "src" / "oncely").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", revision, "src"], capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(target, filter="data")
    python = str(ROOT / ".venv" / "bin" / "python")
    command = [python, "-c", "import sys; from oncely.cli import console; sys.exit(console())"]
    return command, {**os.environ, "PYTHONPATH": str(target / "src")}


def exists(git_dir: Path, commit: str, path: str) -> bool:
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "-e", f"{commit}:{path}"], capture_output=True
    )
    return done.returncode == 0


def clone(replay: Replay, mirror: Path, root: Path) -> Path:
    """A bare clone sharing the mirror's objects: the commits made here stay out of the mirror."""
    source = mirror / replay.folder / "repo"
    if not source.is_dir():
        raise SystemExit(f"{source} is missing: fetch github:{replay.repo} first")
    target = root / f"{replay.folder}.git"
    if not target.is_dir():
        subprocess.run(
            ["git", "clone", "-q", "--bare", "--shared", str(source), str(target)], check=True
        )
    return target


def extract(git_dir: Path, treeish: str, target: Path, config: str) -> Path:
    """The ``.py`` files of ``treeish`` under ``target``, afresh, with ``config`` beside them."""
    if target.exists():
        subprocess.run(["rm", "-rf", "--", str(target)], check=True)
    target.mkdir(parents=True)
    archive = git(git_dir, "archive", treeish, "--", ":(glob)**/*.py")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
        tar.extractall(target, members=members, filter="data")
    (target / "pyproject.toml").write_text(config)
    return target


def suppress(git_dir: Path, replay: Replay) -> str:
    """A commit on top of the older one with each suppression appended to its line."""
    index = git_dir / "replay-index"
    os.environ["GIT_INDEX_FILE"] = str(index)
    try:
        git(git_dir, "read-tree", replay.old)
        for path in sorted({allow.path for allow in replay.allows}):
            lines = git(git_dir, "show", f"{replay.old}:{path}").decode().split("\n")
            for allow in (a for a in replay.allows if a.path == path):
                lines[allow.line - 1] += f"  {MARK} {allow.code} -- {allow.reason}"
            blob = git(git_dir, "hash-object", "-w", "--stdin", stdin="\n".join(lines).encode())
            git(git_dir, "update-index", "--cacheinfo", f"100644,{blob.decode().strip()},{path}")
        tree = git(git_dir, "write-tree").decode().strip()
    finally:
        del os.environ["GIT_INDEX_FILE"]
        index.unlink(missing_ok=True)
    message = b"oncely lint suppressions, written at the older commit"
    return git(git_dir, "commit-tree", tree, "-p", replay.old, stdin=message).decode().strip()


def carry(git_dir: Path, replay: Replay, suppressed: str) -> tuple[str, dict[Allow, str]]:
    """The later commit with the suppression commit merged in, and what became of each
    suppression in a file whose merge conflicted: such a file keeps the later commit's
    text, and a suppression goes on the one line whose text is its old line's (as a person
    resolving the conflict would put it back, by its context when several have that text);
    with no such line it is dropped."""
    out = git(git_dir, "merge-tree", "--write-tree", "--name-only", replay.new, suppressed,
              check=False).decode()  # fmt: skip
    tree, _, rest = out.partition("\n")
    conflicted = set(rest.split("\n\n")[0].split()) if rest.strip() else set()
    if not conflicted:
        return tree, {}
    renamed = renames(git_dir, replay, conflicted)
    outcomes: dict[Allow, str] = {}
    os.environ["GIT_INDEX_FILE"] = str(git_dir / "replay-index")
    try:
        git(git_dir, "read-tree", tree)
        for path in sorted(conflicted):
            mine = [a for a in replay.allows if renamed.get(a.path, a.path) == path]
            if not exists(git_dir, replay.new, path):
                gone = f"0 {'0' * 40}\t{path}\n".encode()
                git(git_dir, "update-index", "--index-info", stdin=gone)
                outcomes.update((allow, f"dropped: {path} is gone") for allow in mine)
                continue
            lines = git(git_dir, "show", f"{replay.new}:{path}").decode().split("\n")
            for allow in mine:
                old = git(git_dir, "show", f"{replay.old}:{allow.path}").decode().split("\n")
                at = placement(old, allow.line - 1, lines)
                if at is None:
                    outcomes[allow] = f"dropped: no line of {path} reads as it did"
                    continue
                lines[at] += f"  {MARK} {allow.code} -- {allow.reason}"
                outcomes[allow] = f"put back by hand at {path}:{at + 1}"
            blob = git(git_dir, "hash-object", "-w", "--stdin", stdin="\n".join(lines).encode())
            git(git_dir, "update-index", "--cacheinfo", f"100644,{blob.decode().strip()},{path}")
        tree = git(git_dir, "write-tree").decode().strip()
    finally:
        del os.environ["GIT_INDEX_FILE"]
        (git_dir / "replay-index").unlink(missing_ok=True)
    return tree, outcomes


def placement(old: list[str], at: int, new: list[str]) -> int | None:
    """The line of ``new`` that is ``old[at]``: the one with its text whose three lines either
    side match ``old``'s most (a patch's context); None if no line has its text, or a tie."""

    def context(lines: list[str], i: int) -> list[str]:
        return [lines[j].strip() if 0 <= j < len(lines) else "" for j in range(i - 3, i + 4)]

    want = context(old, at)
    same = [i for i, line in enumerate(new) if line.strip() == old[at].strip()]
    scored = sorted(
        ((sum(a == b for a, b in zip(context(new, i), want, strict=True)), i) for i in same),
        reverse=True,
    )
    if not scored or (len(scored) > 1 and scored[0][0] == scored[1][0]):
        return None
    return scored[0][1]


def renames(git_dir: Path, replay: Replay, conflicted: set[str]) -> dict[str, str]:
    """Old path to new path of the suppressed files git finds renamed among the conflicted ones
    (only those paths are compared: a snapshot may lack some large blobs)."""
    paths = sorted({a.path for a in replay.allows} | conflicted)
    out = git(git_dir, "diff", "--name-status", "-M", replay.old, replay.new, "--", *paths,
              check=False).decode()  # fmt: skip
    moved = {}
    for line in out.splitlines():
        status, *names = line.split("\t")
        if status.startswith("R") and len(names) == 2:
            moved[names[0]] = names[1]
    return moved


def day(git_dir: Path, commit: str) -> str:
    return git(git_dir, "log", "-1", "--format=%cs", commit).decode().strip()


def carried(folder: Path, replay: Replay) -> int:
    """How many of the written suppressions are in the merged tree, found by their text."""
    texts = {f"{MARK} {a.code} -- {a.reason}" for a in replay.allows}
    return sum(
        line.count(text)
        for source in folder.rglob("*.py")
        for line in source.read_text(errors="replace").splitlines()
        if MARK in line
        for text in texts
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replay", type=Path, default=REPLAY, help="projects and suppressions")
    parser.add_argument("--judged", type=Path, default=JUDGED, help="judgments of ONC002")
    parser.add_argument("--configs", type=Path, default=CONFIGS, help="<owner+name>.toml each")
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--root", type=Path, default=Path("/work/scratch-lint"))
    parser.add_argument("--list", action="store_true", help="print every finding")
    args = parser.parse_args(argv)
    judged = read_judged(args.judged)
    work = args.root / "replay"
    work.mkdir(parents=True, exist_ok=True)
    stale: list[Found] = []
    for replay in read_replay(args.replay):
        project = Project(replay.repo, replay.new, "")
        config = project_config(project, args.configs)
        git_dir = clone(replay, args.mirror, work)
        older = extract(git_dir, replay.old, work / f"{replay.folder}@{replay.old[:12]}", config)
        if replay.oncely is None:
            before = lint(project, older)
        else:
            before = lint(project, older, *old_oncely(replay.oncely, work))
        reported = {(f.path, f.line, f.code) for f in before}
        for allow in replay.allows:
            if (allow.path, allow.line, allow.code) not in reported:
                raise SystemExit(
                    f"{replay.repo} {allow.path}:{allow.line} {allow.code}: not reported at "
                    f"{replay.old[:12]}, so not a suppression anyone would write there"
                )
        tree, outcomes = carry(git_dir, replay, suppress(git_dir, replay))
        placed = sum(outcome.startswith("put back") for outcome in outcomes.values())
        merged = extract(git_dir, tree, work / f"{replay.folder}@{replay.new[:12]}+allow", config)
        after = lint(project, merged)
        mine = [f for f in after if f.code == "ONC002"]
        stale.extend(mine)
        kept = carried(merged, replay)
        old_day, new_day = (day(git_dir, commit) for commit in (replay.old, replay.new))
        by = f", linted by oncely@{replay.oncely[:12]}" if replay.oncely else ""
        print(f"- {replay.repo} {replay.old[:12]} ({old_day}{by}) -> {replay.new[:12]} "
              f"({new_day}): {len(replay.allows)} suppression(s) written, "
              f"{kept - placed} carried by the merge, {placed} put back by hand in a conflict, "
              f"{len(replay.allows) - kept} dropped, "
              f"{len(mine)} stale (ONC002)")  # fmt: skip
        for allow in replay.allows:
            outcome = outcomes.get(allow, "carried by the merge")
            print(f"    {allow.path}:{allow.line} {allow.code}: {outcome}")
        if args.list:
            for found in before:
                print(f"    before {found.path}:{found.line} {found.code} {found.message[:110]}")
            for found in after:
                print(f"    after  {found.path}:{found.line} {found.code} {found.message[:110]}")
    print()
    print("Stale suppressions, judged:")
    print()
    print(verdict_table(stale, judged).split("\n", 2)[0])
    print("|---|---:|---:|---:|---:|---:|")
    print(next(row for row in verdict_table(stale, judged).splitlines() if "| ONC002 |" in row))
    for found in stale:
        verdict, why = judged.get(found.key, ("UNJUDGED", ""))
        print(f"{found.repo} {found.path}:{found.line} ONC002 [{verdict}]"
              f"{' -- ' + why if why else ''}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
