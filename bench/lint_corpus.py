"""oncely lint over a corpus of public projects: findings per rule and per repository, judged.

The corpus is ``bench/lint_corpus.txt``: one ``owner/name commit [exclude=glob,...] kind`` a
line. Each project's ``.py`` files at that commit are materialised under ``--root`` (default
/work/scratch-lint, never the repository) from its bare git directory under ``--mirror``
(default /work/.mirror, where the session's fetch puts ``owner+name/repo``), with a
``pyproject.toml`` of ``[tool.oncely.lint]`` alone: the default configuration, but for the
``exclude`` globs a line gives (third-party code vendored into a project is not the project's).
A project with a file ``bench/lint_corpus_config/<owner+name>.toml`` gets that file appended:
its ``[tool.oncely.lint.ONC2xx]`` tables configure the rules that are inert until configured
(boundaries, confined symbols, declaration kinds, reserved names), each as one the project's
maintainers could adopt; the file's first comment lines say why. Then
``oncely lint --no-cache --format json`` runs in each.

Findings are split into test code (a ``test``/``tests``/``testing`` folder, ``test_*.py``,
``*_test.py``, ``conftest.py``) and the rest, and matched against the judgments in
``bench/lint_corpus_judged.txt`` (``owner/name path:line CODE true|false|test-only -- why``);
a finding not judged yet is listed as such, so a re-run shows what is new. Every rule has its
row, found or not; the corpus has no ``# oncely: allow`` comments, so ONC000 and ONC002 have
nothing to judge here: bench/lint_replay.py writes suppressions and finds the stale ones. Run
from the project root::

    .venv/bin/python bench/lint_corpus.py            # the tables
    .venv/bin/python bench/lint_corpus.py --list     # and every finding, with its judgment
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from oncely.lint.rules import rule_codes

ROOT = Path(__file__).resolve().parent.parent
ONCELY = ROOT / ".venv" / "bin" / "oncely"
CORPUS = ROOT / "bench" / "lint_corpus.txt"
CONFIGS = ROOT / "bench" / "lint_corpus_config"
JUDGED = ROOT / "bench" / "lint_corpus_judged.txt"
VERDICTS = ("true", "false", "test-only")
_TEST_FOLDERS = {"test", "tests", "testing"}


Judgments = dict[tuple[str, str, int, str], tuple[str, str]]


@dataclass(frozen=True)
class Project:
    repo: str
    commit: str
    kind: str
    exclude: tuple[str, ...] = ()

    @property
    def folder(self) -> str:
        return self.repo.replace("/", "+")


@dataclass(frozen=True)
class Found:
    repo: str
    path: str
    line: int
    code: str
    message: str

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.repo, self.path, self.line, self.code)

    @property
    def in_tests(self) -> bool:
        return is_test_path(self.path)


def is_test_path(path: str) -> bool:
    """Whether ``path`` is test code: in a test folder, or a pytest module or conftest."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    return (
        any(part in _TEST_FOLDERS for part in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


def read_corpus(path: Path) -> list[Project]:
    projects = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            repo, commit, kind = line.split(maxsplit=2)
            exclude: tuple[str, ...] = ()
            if kind.startswith("exclude="):
                globs, _, kind = kind.partition(" ")
                exclude = tuple(globs.removeprefix("exclude=").split(","))
            projects.append(Project(repo, commit, kind, exclude))
    return projects


def read_judged(path: Path) -> Judgments:
    """The judgments by finding: verdict and reason."""
    judged: Judgments = {}
    if not path.is_file():
        return judged
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        head, _, why = line.partition(" -- ")
        repo, where, code, verdict = head.split()
        file, _, at = where.rpartition(":")
        if verdict not in VERDICTS:
            raise SystemExit(f"{path}:{number}: verdict {verdict!r} is not one of {VERDICTS}")
        judged[(repo, file, int(at), code)] = (verdict, why.strip())
    return judged


def project_config(project: Project, configs: Path) -> str:
    """The ``pyproject.toml`` the project is linted with: its excludes and its configured rules."""
    exclude = ", ".join(json.dumps(glob) for glob in project.exclude)
    config = f"[tool.oncely.lint]\nexclude = [{exclude}]\n" if exclude else "[tool.oncely.lint]\n"
    extra = configs / f"{project.folder}.toml"
    return config + "\n" + extra.read_text() if extra.is_file() else config


def materialise(project: Project, mirror: Path, root: Path, config: str) -> Path:
    """The project's ``.py`` files at its commit under ``root``, extracted once."""
    target = root / project.folder
    stamp = target / ".corpus-commit"
    if stamp.is_file() and stamp.read_text().strip() == project.commit:
        (target / "pyproject.toml").write_text(config)
        return target
    git_dir = mirror / project.folder / "repo"
    if not git_dir.is_dir():
        raise SystemExit(f"{git_dir} is missing: fetch github:{project.repo} first")
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", project.commit, "--", ":(glob)**/*.py"],
        capture_output=True,
        check=True,
    ).stdout
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        # Regular files and folders only: a link in a fetched tree is not followed out of it.
        members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
        tar.extractall(target, members=members, filter="data")
    (target / "pyproject.toml").write_text(config)
    stamp.write_text(project.commit + "\n")
    return target


def lint(
    project: Project,
    folder: Path,
    oncely: Sequence[str] = (str(ONCELY),),
    env: dict[str, str] | None = None,
) -> list[Found]:
    """``oncely lint`` in ``folder``; ``oncely`` and ``env`` run another version of it."""
    done = subprocess.run(
        [*oncely, "lint", "--no-cache", "--format", "json", "."],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"oncely lint in {folder} exited {done.returncode}: {done.stderr}")
    return [
        Found(project.repo, item["path"], item["line"], item["code"], item["message"])
        for item in json.loads(done.stdout)
    ]


def counts_table(findings: Sequence[Found], repos: Sequence[str]) -> str:
    """Findings per rule (rows) and repository (columns), as ``code/tests``."""
    codes = sorted({f.code for f in findings})
    short = [repo.split("/")[1][:14] for repo in repos]
    out = ["| rule | " + " | ".join(short) + " | all |", "|---" * (len(repos) + 2) + "|"]
    for code in codes:
        cells = []
        for repo in [*repos, None]:
            mine = [f for f in findings if f.code == code and repo in (None, f.repo)]
            tests = sum(f.in_tests for f in mine)
            cells.append(f"{len(mine) - tests}+{tests}t" if mine else "")
        out.append(f"| {code} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def verdict_table(findings: Sequence[Found], judged: Judgments) -> str:
    """Per rule, every rule: true, false, test-only and unjudged findings, outside and inside
    test code."""
    out = [
        "| rule | true | false (outside tests) | false (in tests) | test-only | unjudged |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for code in sorted({*rule_codes(), *(f.code for f in findings)}):
        tally: Counter[str] = Counter()
        for found in (f for f in findings if f.code == code):
            verdict = judged.get(found.key, ("unjudged", ""))[0]
            if verdict == "false":
                verdict = "false-tests" if found.in_tests else "false"
            tally[verdict] += 1
        out.append(
            f"| {code} | {tally['true']} | {tally['false']} | {tally['false-tests']} "
            f"| {tally['test-only']} | {tally['unjudged']} |"
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="owner/name commit kind")
    parser.add_argument("--judged", type=Path, default=JUDGED, help="the judgments")
    parser.add_argument("--configs", type=Path, default=CONFIGS, help="<owner+name>.toml each")
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--root", type=Path, default=Path("/work/scratch-lint"))
    parser.add_argument("--list", action="store_true", help="print every finding")
    args = parser.parse_args(argv)
    projects = read_corpus(args.corpus)
    judged = read_judged(args.judged)
    findings: list[Found] = []
    for project in projects:
        folder = materialise(project, args.mirror, args.root, project_config(project, args.configs))
        files = sum(1 for _ in folder.rglob("*.py"))
        mine = lint(project, folder)
        excluded = f", excluding {', '.join(project.exclude)}" if project.exclude else ""
        configured = (args.configs / f"{project.folder}.toml").is_file()
        excluded += f", configured by {project.folder}.toml" if configured else ""
        print(f"- {project.repo} @ {project.commit[:12]} ({project.kind}): {files} files"
              f"{excluded}, {len(mine)} finding(s)")  # fmt: skip
        findings.extend(mine)
    repos = [project.repo for project in projects]
    print()
    print("Findings per rule and repository (outside test code + in test code):")
    print()
    print(counts_table(findings, repos))
    print()
    print("Judged:")
    print()
    print(verdict_table(findings, judged))
    stale = set(judged) - {f.key for f in findings}
    if stale:
        print(f"\n{len(stale)} judgment(s) of findings no longer reported:")
        for repo, path, line, code in sorted(stale):
            print(f"  {repo} {path}:{line} {code} ({judged[(repo, path, line, code)][0]})")
    if args.list:
        print()
        for found in findings:
            verdict, why = judged.get(found.key, ("UNJUDGED", ""))
            where = "test " if found.in_tests else ""
            print(f"{found.repo} {found.path}:{found.line} {found.code} [{where}{verdict}] "
                  f"{found.message}{' -- ' + why if why else ''}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
