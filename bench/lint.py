"""oncely lint's speed on a large real Python tree, beside flake8, lint-imports and ruff.

The tree is the installed Django source in ``.venv-bench`` (see ``bench/requirements-peers.txt``)
unless ``--tree`` names another. Its ``.py`` files are copied into a scratch directory that also
holds an empty ``pyproject.toml`` (``[tool.oncely.lint]``, all rules) and an ``.importlinter``;
every tool lints that copy, so each cache (``.oncely_cache/``, ``.ruff_cache/``,
``.import_linter_cache/``) is written under the scratch directory, never into site-packages.

Timed, as wall time around ``subprocess.run`` (output discarded, exit codes ignored except
oncely's usage error), median of ``--runs`` (5):

- oncely lint, every rule: cold with ``--no-cache``; warm is a second run over an unchanged tree
  after one run that filled the cache;
- flake8 ``--select F`` (pyflakes rules only), cold; it has no cache;
- lint-imports with one independence contract between a few of the tree's subpackages
  (for Django: ``db``, ``forms``, ``http``, ``template``): cold ``--no-cache``, warm with its cache;
- ruff check ``--select F``: cold ``--no-cache``, warm with its cache filled by a first run.

The issue's targets: oncely cold faster than flake8 and lint-imports cold; oncely warm within
2x of ruff warm. ``--profile`` adds one cProfile run of oncely lint (in one process) on the copy.
Run from the project root::

    .venv/bin/python bench/lint.py --runs 3
    .venv/bin/python bench/lint.py --tree src/oncely --runs 1     # smoke test
    .venv/bin/python bench/lint.py --tree src/oncely --runs 1 --no-peers   # without .venv-bench
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ONCELY = ROOT / ".venv" / "bin" / "oncely"
PEERS_BIN = ROOT / ".venv-bench" / "bin"
PEERS = ("flake8", "lint-imports", "ruff")
PREFERRED_CONTRACT = ("db", "forms", "http", "template")


@dataclass(frozen=True)
class Row:
    """One tool's medians in seconds; ``warm`` is None for a tool without a cache."""

    tool: str
    cold: float
    warm: float | None


def missing_peers() -> list[str]:
    """The peer executables that ``.venv-bench`` lacks (empty when the bench can run)."""
    return [name for name in PEERS if not (PEERS_BIN / name).is_file()]


def django_tree() -> Path:
    """The directory of the Django package installed in ``.venv-bench``."""
    script = "import django, os; print(os.path.dirname(django.__file__))"
    done = subprocess.run(
        [str(PEERS_BIN / "python"), "-c", script], capture_output=True, text=True, check=True
    )
    return Path(done.stdout.strip())


def python_lines(tree: Path) -> tuple[int, int]:
    """The number of ``.py`` files under ``tree`` and of their lines."""
    files = sorted(tree.rglob("*.py"))
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    return len(files), lines


def copy_tree(tree: Path, scratch: Path) -> Path:
    """``tree``'s ``.py`` files (and their folders) under ``scratch``, plus the two configs."""

    def not_python(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if not n.endswith(".py") and not Path(folder, n).is_dir()]

    copy = scratch / tree.name
    shutil.copytree(tree, copy, ignore=not_python)
    (scratch / "pyproject.toml").write_text("[tool.oncely.lint]\n")
    return copy


def compile_oncely() -> None:
    """Byte-compile the oncely that ``.venv`` runs, as pip does when it installs a wheel. An
    editable checkout run under PYTHONDONTWRITEBYTECODE=1 never writes its bytecode, and so
    compiles its own modules on every run: a cost (about 20 ms of a warm run) that no installed
    oncely pays."""
    script = (
        "import compileall, os, oncely; "
        "compileall.compile_dir(os.path.dirname(oncely.__file__), quiet=1)"
    )
    subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", script], check=True)


def contract_modules(copy: Path) -> list[str]:
    """A few subpackages of the copied package for the independence contract."""
    subpackages = sorted(p.name for p in copy.iterdir() if (p / "__init__.py").is_file())
    preferred = [name for name in PREFERRED_CONTRACT if name in subpackages]
    chosen = preferred if len(preferred) >= 2 else subpackages[:4]
    return [f"{copy.name}.{name}" for name in chosen]


def write_importlinter(scratch: Path, package: str, modules: Sequence[str]) -> None:
    lines = [
        "[importlinter]",
        f"root_package = {package}",
        "",
        "[importlinter:contract:independent]",
        f"name = {', '.join(modules)} do not import one another",
        "type = independence",
        "modules =",
        *(f"    {module}" for module in modules),
    ]
    (scratch / ".importlinter").write_text("\n".join(lines) + "\n")


def timed(command: Sequence[str], cwd: Path, check_usage: bool = False) -> float:
    """Wall seconds of one run of ``command`` in ``cwd``; exit status 2 fails when asked."""
    started = time.perf_counter()
    done = subprocess.run(
        list(command),
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_environment(cwd),
        check=False,
    )
    elapsed = time.perf_counter() - started
    if check_usage and done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed


def _environment(cwd: Path) -> dict[str, str]:
    # lint-imports imports nothing from the tree but finds the package on sys.path.
    return {**os.environ, "PYTHONPATH": str(cwd)}


def median_of(
    runs: int, once: Callable[[], float], before: Callable[[], object] | None = None
) -> float:
    samples = []
    for _ in range(runs):
        if before is not None:
            before()
        samples.append(once())
    return statistics.median(samples)


def measure(
    scratch: Path, copy: Path, runs: int, peers: bool = True
) -> tuple[list[Row], dict[str, list[str]]]:
    """The four tools' medians over the copy at ``copy`` (oncely's alone without ``peers``),
    and the commands timed."""
    target = copy.name
    oncely_cold = [str(ONCELY), "lint", "--no-cache", target]
    oncely_warm = [str(ONCELY), "lint", target]
    flake8 = [str(PEERS_BIN / "flake8"), "--select", "F", target]
    imports_cold = [str(PEERS_BIN / "lint-imports"), "--no-cache"]
    imports_warm = [str(PEERS_BIN / "lint-imports")]
    ruff_cold = [str(PEERS_BIN / "ruff"), "check", "--select", "F", "--no-cache", target]
    ruff_warm = [str(PEERS_BIN / "ruff"), "check", "--select", "F", target]

    def warm(command: list[str], check_usage: bool = False) -> float:
        timed(command, scratch, check_usage)  # fills the cache; the next run changes nothing
        return median_of(runs, lambda: timed(command, scratch, check_usage))

    oncely = Row(
        "oncely lint",
        median_of(runs, lambda: timed(oncely_cold, scratch, check_usage=True)),
        warm(oncely_warm, check_usage=True),
    )
    if not peers:
        return [oncely], {"oncely lint": [" ".join(oncely_cold), " ".join(oncely_warm)]}
    rows = [
        oncely,
        Row("flake8 --select F", median_of(runs, lambda: timed(flake8, scratch)), None),
        Row(
            "lint-imports",
            median_of(runs, lambda: timed(imports_cold, scratch)),
            warm(imports_warm),
        ),
        Row(
            "ruff check --select F",
            median_of(runs, lambda: timed(ruff_cold, scratch)),
            warm(ruff_warm),
        ),
    ]
    commands = {
        "oncely lint": [" ".join(oncely_cold), " ".join(oncely_warm)],
        "flake8 --select F": [" ".join(flake8)],
        "lint-imports": [" ".join(imports_cold), " ".join(imports_warm)],
        "ruff check --select F": [" ".join(ruff_cold), " ".join(ruff_warm)],
    }
    return rows, commands


def versions(peers: bool = True) -> dict[str, str]:
    """Each tool's installed version, read from its virtualenv's metadata."""
    script = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"
    found = {}
    tools = [(ROOT / ".venv" / "bin" / "python", "oncely")]
    if peers:
        tools += [
            (PEERS_BIN / "python", distribution)
            for distribution in ("flake8", "pyflakes", "import-linter", "ruff", "django")
        ]
    for python, distribution in tools:
        done = subprocess.run(
            [str(python), "-c", script, distribution], capture_output=True, text=True, check=False
        )
        found[distribution] = done.stdout.strip() or "?"
    return found


def table(rows: Sequence[Row], lines: int) -> str:
    """The markdown table: seconds, lines per second, and oncely's time over each peer's."""
    oncely = rows[0]

    def rate(seconds: float | None) -> str:
        return "—" if seconds is None else f"{lines / seconds:,.0f}"

    def ratio(mine: float | None, theirs: float | None) -> str:
        return "—" if mine is None or theirs is None else f"{mine / theirs:.2f}"

    out = [
        "| tool | cold s | warm s | lines/s cold | lines/s warm "
        "| oncely/peer cold | oncely/peer warm |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        peer = row is not oncely
        out.append(
            f"| {row.tool} | {row.cold:.3f} | "
            f"{'—' if row.warm is None else f'{row.warm:.3f}'} | {rate(row.cold)} | "
            f"{rate(row.warm)} | {ratio(oncely.cold, row.cold) if peer else '—'} | "
            f"{ratio(oncely.warm, row.warm) if peer else '—'} |"
        )
    return "\n".join(out)


def targets(rows: Sequence[Row]) -> list[str]:
    """The issue's three targets, each met or missed and by how much."""
    oncely, flake8, imports, ruff = rows
    verdicts = []
    for peer in (flake8, imports):
        met = oncely.cold < peer.cold
        verdicts.append(
            f"- cold faster than {peer.tool}: {'met' if met else 'MISSED'} "
            f"({oncely.cold:.3f} s vs {peer.cold:.3f} s, {oncely.cold / peer.cold:.2f}x)"
        )
    assert oncely.warm is not None
    assert ruff.warm is not None
    met = oncely.warm <= 2 * ruff.warm
    verdicts.append(
        f"- warm within 2x of ruff's warm run: {'met' if met else 'MISSED'} "
        f"({oncely.warm:.3f} s vs 2 x {ruff.warm:.3f} s = {2 * ruff.warm:.3f} s; "
        f"{oncely.warm / ruff.warm:.2f}x)"
    )
    return verdicts


def profile(scratch: Path, copy: Path, top: int) -> str:
    """One cold oncely lint of the copy in this process (one worker), top functions by cumtime."""
    from oncely.lint import load_config
    from oncely.lint.engine import lint_files

    config = load_config(scratch / "pyproject.toml")
    profiler = cProfile.Profile()
    profiler.enable()
    lint_files([copy], config, jobs=1)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--tree", type=Path, help="package to lint (default: .venv-bench's Django)")
    parser.add_argument("--profile", type=int, metavar="N", help="also cProfile oncely; top N")
    parser.add_argument(
        "--no-peers", action="store_true",
        help="oncely lint alone, without .venv-bench (needs --tree): no peers, no targets",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.no_peers and args.tree is None:
        parser.error("--no-peers needs --tree: the default tree is .venv-bench's Django")
    absent = [] if args.no_peers else missing_peers()
    if absent:
        print(
            f"error: .venv-bench lacks {', '.join(absent)}; run 'python3 -m venv .venv-bench && "
            ".venv-bench/bin/pip install -r bench/requirements-peers.txt'",
            file=sys.stderr,
        )
        return 2
    tree = (args.tree or django_tree()).resolve()
    files, lines = python_lines(tree)
    with tempfile.TemporaryDirectory(prefix="bench-lint-") as tmp:
        scratch = Path(tmp)
        copy = copy_tree(tree, scratch)
        modules = contract_modules(copy)
        write_importlinter(scratch, copy.name, modules)
        compile_oncely()
        rows, commands = measure(scratch, copy, args.runs, peers=not args.no_peers)
        beside = "alone (--no-peers)" if args.no_peers else "beside flake8, lint-imports and ruff"
        print(f"# oncely lint {beside}: {tree}")
        print()
        print(f"{files:,} Python files, {lines:,} lines; medians of {args.runs} run(s); "
              f"{datetime.date.today().isoformat()}")  # fmt: skip
        print(f"Command: {' '.join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])])}")
        print("Versions: " + ", ".join(f"{k} {v}" for k, v in versions(not args.no_peers).items()))
        if not args.no_peers:
            print(f"lint-imports contract: independence of {', '.join(modules)}")
        print(f"Each tool runs in a scratch copy of the tree's .py files ({scratch}), whose ")
        print("pyproject.toml ([tool.oncely.lint], all rules) makes it oncely's config root.")
        print("oncely's own modules are byte-compiled first, as an installed oncely's are.")
        print()
        print(table(rows, lines))
        print()
        print("Commands timed (cwd: the scratch directory):")
        for tool, lines_run in commands.items():
            for command in lines_run:
                print(f"- {tool}: `{command.replace(str(ROOT) + '/', '')}`")
        print()
        print("Targets (issue 6):")
        if args.no_peers:
            print("- not checked: no peer was measured (--no-peers)")
        else:
            print("\n".join(targets(rows)))
        if args.profile:
            print()
            print(profile(scratch, copy, args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
