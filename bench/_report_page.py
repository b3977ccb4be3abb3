"""The page ``bench/report.py`` writes: ``docs/performance.md`` and the lag chart's data.

Pure formatting of the benchmarks' JSON documents (and bench/lint.py's own output), keyed by
task name (see ``report.plan``). A task that failed leaves its section saying so. Ratios are
always oncely's figure divided by the peer's, measured in the same run: above 1 is better for
oncely in throughput, below 1 is better for oncely in lag and cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _handlers_page import handlers_section
from _history_page import history_section

PEER_NAMES = {
    "procrastinate": "procrastinate",
    "pgqueuer": "pgqueuer",
    "apscheduler": "APScheduler 4",
}
STORE_NAMES = {"postgres": "PostgreSQL", "sqlite": "SQLite"}
MODE_TITLES = {
    "recurring": "Recurring: {n:,} schedules due every second",
    "oneoff": "One-offs: {n:,} due at each whole second, enqueued beforehand",
}
#: What the page says about each peer's lag workloads, for the versions pinned in
#: bench/requirements-peers.txt (details and sources: bench/_peers/<peer>_schedules.py).
PEER_NOTES = {
    "procrastinate": 'recurring: `periodic(cron="* * * * * *")`, the documented optional seconds '
    "column; every worker's periodic deferrer wakes half a second after each due second (by "
    "design, `periodic.MARGIN`) and defers the due tasks one query each. One-offs: "
    "`configure(schedule_at=...)`; an idle worker polls for them every 5 s (default).",
    "pgqueuer": "recurring: pgqueuer documents five-field cron (at most once a minute); its "
    'croniter accepts a sixth, seconds column and it runs it, so `"* * * * * *"` is measured, '
    "outside what it documents. A schedule is one row: found late, it fires once, and its "
    "scheduler sleeps until the next cron time plus one second, so seconds are missed by design. "
    "One-offs: `execute_after`.",
    "apscheduler": "recurring: `IntervalTrigger(seconds=1)`; one-offs: `DateTrigger` schedules "
    "(a later job is a schedule in APScheduler 4), added one call each. Defaults: coalesce "
    '"latest" (a schedule found late fires once), no misfire grace limit.',
}


def _cell(value: Any, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def _ratio(ours: Any, theirs: Any) -> str:
    if ours is None or not theirs:
        return "-"
    ratio = ours / theirs
    return f"{ratio:.2f}" if ratio >= 0.1 or ratio == 0 else f"{ratio:.2g}"


def _document(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    outcome = results.get(name)
    return None if outcome is None or outcome.error else outcome.document


def _failed(results: dict[str, Any], *names: str) -> list[str]:
    lines = []
    for name in names:
        outcome = results.get(name)
        if outcome is not None and outcome.error:
            lines += ["", f"**`{name}` failed; not measured:**", "", "```", outcome.error, "```"]
    return lines


def _worker_part(results: dict[str, Any], name: str, part: str) -> dict[str, Any] | None:
    """The ``part`` ("lag", "oneoff_lag", "idle") figures of ``name`` (a store of oncely's, or
    a peer) from its ``worker-<name>`` outcome."""
    document = _document(results, f"worker-{name}")
    return None if document is None else document.get(part, {}).get(name)


def _peers(results: dict[str, Any]) -> list[str]:
    names = [name.removeprefix("worker-") for name in results]
    return [name for name in names if name in PEER_NAMES]


# --- the chart ---------------------------------------------------------------------------------


def lag_rows(results: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    """One row per scheduler and store: label, what it used, workers and the lag medians."""
    key = "lag" if mode == "recurring" else "oneoff_lag"
    rows = []
    for store in ("postgres", "sqlite"):
        entry = _worker_part(results, store, key)
        if entry is not None:
            med = entry["median"]
            uses = "every(seconds=1)" if mode == "recurring" else "app.defer(at=...)"
            rows.append({"scheduler": "oncely", "store": store, "uses": uses, **med})
    for peer in _peers(results):
        info = _worker_part(results, peer, "lag")
        if info is not None and mode in info["results"]:
            med = info["results"][mode]["median"]
            rows.append(
                {"scheduler": peer, "store": "postgres", "uses": info["modes"][mode], **med}
            )
    for row in rows:
        name = PEER_NAMES.get(row["scheduler"], row["scheduler"])
        workers = f"{row['workers']:.0f} worker{'s' if row['workers'] != 1 else ''}"
        row["label"] = f"{name} ({STORE_NAMES[row['store']]}, {workers})"
    return rows


def _mode_title(mode: str, rows: list[dict[str, Any]]) -> str:
    return MODE_TITLES[mode].format(n=rows[0]["schedules"] if rows else 0)


def render_chart(results: dict[str, Any]) -> dict[str, Any]:
    """The lag chart's description for ``bench/_lag_chart.py``."""
    panels = []
    for mode in ("recurring", "oneoff"):
        rows = lag_rows(results, mode)
        panels.append({"title": _mode_title(mode, rows), "rows": rows})
    return {"title": "Lag from due time to handler start: median p50 / p90 / p99", "panels": panels}


# --- the page ----------------------------------------------------------------------------------


def _header(results: dict[str, Any], meta: dict[str, Any], measured_s: float) -> list[str]:
    versions = dict(meta["versions"])
    oncely = versions.pop("oncely")
    postgres = python = platform = redis = "?"
    for name in ("burst-peers", *(f"worker-{p}" for p in _peers(results))):
        document = _document(results, name)
        if document:
            postgres = document["machine"]["postgres"]
            platform = document["machine"]["platform"]
    for name in ("worker-postgres", "worker-sqlite"):
        document = _document(results, name)
        if document:
            python = document["setting"]["python"]
            postgres = document["setting"]["postgres"] or postgres
            platform = document["setting"]["platform"]
    locks = _document(results, "locks")
    if locks:
        redis = locks["redis"]
    lint_out = results["lint"].stdout.splitlines() if "lint" in results else []
    lint_versions = next(
        (line.removeprefix("Versions: ") for line in lint_out if line.startswith("Versions: ")),
        "?",
    )
    loads = [load for outcome in results.values() for load in outcome.load]
    via = f"`{meta['via']}`, which ran " if meta.get("via") else ""
    took = meta["elapsed_s"]
    took_text = f"{took / 60:.0f} min" if took >= 120 else f"{took:.0f} s"
    lines = [
        "# Performance",
        "",
        "Every figure below was measured by one command, one benchmark after the other on one "
        "machine, oncely's next to its peers'. Each is the median of "
        f"{meta['runs']} run(s); ratios are oncely's figure divided by the peer's from this same "
        "run (above 1 is better for oncely in throughput, below 1 in lag and cost).",
        "",
        f"- Command: {via}`{meta['command']}` on {meta['date']}; it took {took_text}.",
        f"- oncely {oncely}"
        + ("; " + ", ".join(f"{k} {v}" for k, v in versions.items()) if versions else "")
        + ".",
        f"- Linters: {lint_versions}.",
        f"- PostgreSQL {postgres}, Redis {redis}, Python {python}, {meta['cpus']} CPUs, "
        f"{platform}.",
    ]
    if loads:
        lines.append(
            f"- 1-minute load average at the start and end of each benchmark: {min(loads):.1f} to "
            f"{max(loads):.1f} on {meta['cpus']} CPUs. The machine is shared with other work; "
            "figures measured while it is busy are pessimistic (for every scheduler, not "
            "necessarily equally)."
        )
    if kept := meta.get("kept"):
        lines.append(
            "- Resumed with `--resume`: the figures of "
            + ", ".join(f"{label} (finished {at})" for label, at in kept.items())
            + " are those an earlier run of the same command measured on the same source "
            "(`bench/results/`); the time above is this run's alone, and measuring every figure "
            f"took {measured_s / 60:.0f} min in all."
        )
    if meta["no_peers"]:
        lines += ["", "**`--no-peers`: oncely alone; no peer was measured and no chart drawn.**"]
    if meta["quick"]:
        lines += [
            "",
            "**`--quick`: a smoke test with tiny sizes, benchmarks run side by side. "
            "These figures measure nothing.**",
        ]
    return lines


def _summary(results: dict[str, Any]) -> list[str]:
    """One line per figure: oncely on PostgreSQL, each peer, and oncely ÷ that peer."""
    peers = _peers(results)
    if not peers:
        return []
    figures: list[tuple[str, Any, dict[str, Any], str]] = []  # title, oncely, peers, format
    ours, theirs = _document(results, "burst-oncely"), _document(results, "burst-peers")
    if ours and theirs:
        count = max(ours["oncely"].get("postgres", {"0": None}), key=int)
        mine = ours["oncely"].get("postgres", {}).get(count, {}).get("median", {})
        figures.append((
            f"burst, jobs/s ({count} worker{'s' if count != '1' else ''})", mine.get("jobs_per_s"),
            {peer: info["results"].get(count, {}).get("median", {}).get("jobs_per_s")
             for peer, info in theirs["peers"].items()},
            ",.0f",
        ))  # fmt: skip
    for mode, title in (("recurring", "every second"), ("oneoff", "one-offs")):
        rows = {(r["scheduler"], r["store"]): r for r in lag_rows(results, mode)}
        for field in ("p50_ms", "p99_ms"):
            mine = rows.get(("oncely", "postgres"), {}).get(field)
            others = {peer: rows.get((peer, "postgres"), {}).get(field) for peer in peers}
            figures.append((f"lag {field[:3]}, {title}, ms", mine, others, ",.1f"))
    reference = _worker_part(results, "postgres", "idle")
    for field, title, spec in (
        ("cpu_s_per_min", "idle, CPU s/min", ".3f"),
        ("pg_transactions_per_min", "idle, transactions/min", ",.1f"),
    ):
        mine = None if reference is None else reference["median"][field]
        others = {
            p: (_worker_part(results, p, "idle") or {}).get("median", {}).get(field) for p in peers
        }
        figures.append((title, mine, others, spec))
    names = [PEER_NAMES[peer] for peer in peers]
    lines = [
        "",
        "## At a glance",
        "",
        "oncely on PostgreSQL beside each peer on the same PostgreSQL; in brackets oncely ÷ peer. "
        "Details, SQLite figures and what each peer could express follow.",
        "",
        "| figure | oncely | " + " | ".join(names) + " |",
        "|---|--:|" + "--:|" * len(names),
    ]
    for title, mine, others, spec in figures:
        cells = [
            f"{_cell(others.get(peer), spec)} ({_ratio(mine, others.get(peer))})"
            if others.get(peer) is not None
            else "-"
            for peer in peers
        ]
        lines.append(f"| {title} | {_cell(mine, spec)} | " + " | ".join(cells) + " |")
    return lines


def _burst(results: dict[str, Any]) -> list[str]:
    ours, theirs = _document(results, "burst-oncely"), _document(results, "burst-peers")
    reference = ours or theirs
    lines = ["", "## Burst throughput", ""]
    if reference:
        lines += [
            f"{reference['jobs']:,} jobs all due now, a handler that appends its number to a "
            "file, drained by worker processes (`bench/engine.py`, `bench/peers.py`). "
            "Enqueueing is timed apart, once: on PostgreSQL each run drains a copy of a database "
            "the jobs were enqueued into. APScheduler and procrastinate drain fewer jobs (the "
            "jobs column): at their rates 20,000 took minutes per run. oncely ÷ peer compares "
            "jobs/s on PostgreSQL with the same number of workers.",
            "",
            "| scheduler | store | workers | jobs | enqueue s | drain s | jobs/s | dup | miss "
            "| oncely ÷ peer |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
    pg = {} if ours is None else ours["oncely"].get("postgres", {})
    if ours:
        for store, by_count in ours["oncely"].items():
            for count, entry in by_count.items():
                lines.append(_burst_row("oncely", store, count, ours["jobs"], entry["median"], "-"))
    if theirs:
        for peer, info in theirs["peers"].items():
            for count, entry in info["results"].items():
                ratio = _ratio(pg.get(count, {}).get("median", {}).get("jobs_per_s"),
                               entry["median"]["jobs_per_s"])  # fmt: skip
                jobs = info.get("jobs", theirs["jobs"])
                lines.append(
                    _burst_row(PEER_NAMES[peer], "postgres", count, jobs, entry["median"], ratio)
                )
        lines += ["", "Peer settings (why: `bench/_peers/<peer>_peer.py`):", ""]
        for peer, info in theirs["peers"].items():
            settings = "; ".join(f"{k}: {v}" for k, v in info["settings"].items())
            lines.append(f"- {PEER_NAMES[peer]}: {settings}.")
    return lines + _failed(results, "burst-oncely", "burst-peers")


def _burst_row(
    name: str, store: str, count: str, jobs: int, med: dict[str, Any], ratio: str
) -> str:
    return (
        f"| {name} | {STORE_NAMES[store]} | {count} | {jobs:,} | {_cell(med['enqueue_s'], '.1f')} "
        f"| {_cell(med['drain_s'], '.2f')} | {_cell(med['jobs_per_s'])} | {med['duplicates']} "
        f"| {med['missing']} | {ratio} |"
    )


def _settings(results: dict[str, Any], key: str) -> dict[str, Any]:
    """The peers' lag or idle settings (``key``), which oncely's runs share; {} if none ran."""
    for peer in _peers(results):
        document = _document(results, f"worker-{peer}")
        if document:
            return dict(document[key])
    return {}


def _lag(results: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    settings = _settings(results, "lag_settings")
    per_run = (
        f" ({settings['seconds']:g} s per run, without its first and last {settings['margin']:g} s)"
        if settings
        else ""
    )
    lines = [
        "",
        "## Lag",
        "",
        "How late each scheduler starts what is due: handler start (its first act, "
        "`time.time()`) minus the time the run was due, over the whole seconds of each run"
        f"{per_run}; workers are real processes (`oncely run`; each peer's "
        "own worker), 2 on PostgreSQL, 1 on SQLite (`bench/worker.py`, `bench/peer_worker.py`). "
        "Duplicates: a key and due time run twice; misses: due in the window, never run. "
        "oncely ÷ peer compares with oncely on PostgreSQL.",
    ]
    for mode in ("recurring", "oneoff"):
        rows = lag_rows(results, mode)
        ours = [r for r in rows if r["scheduler"] == "oncely" and r["store"] == "postgres"]
        reference = ours[0] if ours else {}
        lines += [
            "",
            f"### {_mode_title(mode, rows)}",
            "",
            "| scheduler | uses | store | workers | due | ran | p50 ms | p90 ms | p99 ms | max ms "
            "| dup | miss | worker CPU (cores) | oncely ÷ peer p50 | oncely ÷ peer p99 |",
            "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for row in rows:
            peer = row["scheduler"] != "oncely"
            lines.append(
                f"| {PEER_NAMES.get(row['scheduler'], 'oncely')} | `{row['uses']}` "
                f"| {STORE_NAMES[row['store']]} | {row['workers']:.0f} | {_cell(row['due'])} "
                f"| {_cell(row['ran'])} | {_cell(row['p50_ms'], ',.1f')} "
                f"| {_cell(row['p90_ms'], ',.1f')} | {_cell(row['p99_ms'], ',.1f')} "
                f"| {_cell(row['max_ms'], ',.1f')} | {row['duplicates']} | {row['misses']} "
                f"| {row['worker_cores']:.2f} "
                f"| {_ratio(reference.get('p50_ms'), row['p50_ms']) if peer else '-'} "
                f"| {_ratio(reference.get('p99_ms'), row['p99_ms']) if peer else '-'} |"
            )
    if not meta["no_peers"]:
        lines += ["", f"![Lag p50/p90/p99 per scheduler]({meta['chart']})"]
    if meta.get("chart_error"):
        lines += ["", "The chart could not be drawn:", "", "```", meta["chart_error"], "```"]
    if _peers(results):
        lines += ["", "What each peer can express, and what was measured instead:", ""]
    for peer in _peers(results):
        lines.append(f"- {PEER_NAMES[peer]}: {PEER_NOTES[peer]}")
    workers = ["worker-postgres", "worker-sqlite", *(f"worker-{p}" for p in _peers(results))]
    return lines + _failed(results, *workers)


def _idle(results: dict[str, Any]) -> list[str]:
    settings = _settings(results, "idle_settings")
    # The window each run measured, not the settings: the settings merged from a peer's lag
    # part said 60 s when the idle part had measured 30 s.
    windows = sorted({entry["median"]["window_s"] for entry in _idle_entries(results)})
    window = " or ".join(f"{w:g}" for w in windows) if windows else None
    size = (
        f"{settings['schedules']:,} hourly schedules of which none comes due, measured over "
        f"{window} s after {settings['settle']:g} s of start-up"
        if settings and window
        else "hourly schedules of which none comes due"
    )
    lines = [
        "",
        "## Idle cost",
        "",
        f"One worker process, {size}: transactions its database counted (PostgreSQL's "
        "`pg_stat_database`) and the process's CPU, per minute. oncely is measured after a fixed "
        "start-up; a peer still busy then (pgqueuer and procrastinate expand schedules declared "
        "in code when they start) is measured once it has used under 2% of a core for 10 s, and "
        "the start-up column says when that was. oncely's schedules start over an hour ahead; "
        "the peers' cron can place them at most an hour ahead, so theirs are 10+ minutes ahead. "
        "oncely ÷ peer compares with oncely on PostgreSQL.",
        "",
        "| scheduler | uses | store | insert s | start-up s | transactions/min "
        "| store queries/min | CPU s/min | % of a core | oncely ÷ peer CPU "
        "| oncely ÷ peer transactions |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    reference: dict[str, Any] = {}
    settle = f"{settings['settle']:g}" if settings else "-"
    for store in ("postgres", "sqlite"):
        entry = _worker_part(results, store, "idle")
        if entry is None:
            continue
        med = entry["median"]
        if store == "postgres":
            reference = med
        lines.append(
            f'| oncely | `rrule("FREQ=HOURLY")` | {STORE_NAMES[store]} | {entry["insert_s"]:.1f} '
            f"| {settle} | {_cell(med['pg_transactions_per_min'], ',.1f')} "
            f"| {med['store_queries_per_min']:,.1f} | {med['cpu_s_per_min']:.3f} "
            f"| {med['core_percent']:.2f} | - | - |"
        )
    xacts = "pg_transactions_per_min"
    for peer in _peers(results):
        entry = _worker_part(results, peer, "idle")
        if entry is None:
            continue
        med = entry["median"]
        lines.append(
            f"| {PEER_NAMES[peer]} | `{entry['uses']}` | PostgreSQL "
            f"| {_cell(entry['insert_s'] or None, '.1f')} "  # 0: declared in code, nothing stored
            f"| {med['startup_s']:.0f} | {med[xacts]:,.1f} | - | {med['cpu_s_per_min']:.3f} "
            f"| {med['core_percent']:.2f} "
            f"| {_ratio(reference.get('cpu_s_per_min'), med['cpu_s_per_min'])} "
            f"| {_ratio(reference.get(xacts), med[xacts])} |"
        )
    engine = _document(results, "burst-oncely")
    if engine and engine.get("idle"):
        sizes = next(iter(engine["idle"].values()))["sizes"]
        lines += [
            "",
            "One idle tick of oncely's engine (`bench/engine.py`): median time and the queries "
            "it sends, by number of stored schedules; the ratio is the largest size's time over "
            "the smallest's (1.0: size does not matter).",
            "",
            "| store | " + " | ".join(f"{int(n):,} schedules" for n in sizes) + " | ratio |",
            "|---|" + "--:|" * (len(sizes) + 1),
        ]
        for dialect, info in engine["idle"].items():
            cells = " | ".join(
                f"{size['tick_ms']:.2f} ms, {size['queries']} queries"
                for size in info["sizes"].values()
            )
            name = STORE_NAMES.get(dialect, dialect)
            lines.append(f"| {name} | {cells} | {info['ratio']:.2f} |")
    return lines + _failed(results, "burst-oncely")


def _idle_entries(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The idle figures of oncely on each store and of each peer that measured them."""
    found = [
        *(_worker_part(results, store, "idle") for store in ("postgres", "sqlite")),
        *(_worker_part(results, peer, "idle") for peer in _peers(results)),
    ]
    return [entry for entry in found if entry is not None]


def _locks(results: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Lock throughput",
        "",
        "Acquire+release pairs per second of `app.lock`, by 1 thread and by 8 threads "
        "contending for one name (`bench/locks.py`). No peer offers a lock of its own to "
        "compare: procrastinate's `lock=` and queueing locks order its jobs, pgqueuer and "
        "APScheduler 4 have none.",
    ]
    document = _document(results, "locks")
    if document:
        lines += ["", "| provider | 1 thread | 8 contending threads |", "|---|--:|--:|"]
        for provider, by_threads in document["pairs_per_s"].items():
            cells = " | ".join(f"{entry['median']:,.0f}" for entry in by_threads.values())
            lines.append(f"| {STORE_NAMES.get(provider, provider.capitalize())} | {cells} |")
    return lines + _failed(results, "locks")


def _lint(results: dict[str, Any]) -> list[str]:
    lines = ["", "## Lint speed", ""]
    outcome = results.get("lint")
    if outcome is not None and not outcome.error:
        quoted = [line for line in outcome.stdout.splitlines() if not line.startswith("# ")]
        lines += ["`bench/lint.py`'s own report, quoted:", "", *quoted]
    return lines + _failed(results, "lint")


def _recurrence(results: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Recurrence expansion",
        "",
        "`next_after()` calls per second (`bench/recurrence.py`), for series started 1 day and "
        '10 years before "now"; cost 10y/1d is the time per call of the older over the newer '
        "(1.0: age does not matter). The peer row is dateutil's own `rrule.after()`.",
    ]
    document = _document(results, "recurrence")
    if document:
        lines += ["", "| rule | 1 day old | 10 years old | cost 10y/1d |", "|---|--:|--:|--:|"]
        for row in document["results"]:
            calls = row["calls_per_s"]
            if "-" in calls:
                lines.append(f"| {row['rule']} | {calls['-']:,.0f} | | |")
            else:
                lines.append(
                    f"| {row['rule']} | {calls['1d']:,.0f} | {calls['10y']:,.0f} "
                    f"| {_cell(row['cost_ratio_10y_1d'], ',.2f')} |"
                )
    return lines + _failed(results, "recurrence")


def _commands(outcomes: Sequence[Any]) -> list[str]:
    lines = ["", "## Commands", "", "Run from the project root, in this order:", ""]
    for outcome in outcomes:
        attempts = f", {outcome.attempts} attempts" if outcome.attempts > 1 else ""
        status = "FAILED" if outcome.error else f"{outcome.elapsed_s / 60:.1f} min"
        if outcome.status and not outcome.error:
            status += f"; exit status {outcome.status}: it counted duplicates or misses"
        lines.append(f"- `{outcome.task.shown()}` ({status}{attempts})")
    return lines


def render_page(results: dict[str, Any], outcomes: Sequence[Any], meta: dict[str, Any]) -> str:
    """The markdown of ``docs/performance.md``: ``results`` by task name (parts merged),
    ``outcomes`` every command in the order it ran."""
    lines = [
        *_header(results, meta, sum(outcome.elapsed_s for outcome in outcomes)),
        *_summary(results),
        *_burst(results),
        *_lag(results, meta),
        *_idle(results),
        "",
        *handlers_section(_document(results, "handlers")),
        *_failed(results, "handlers"),
        *enqueue_section(_document(results, "enqueue")),
        *_failed(results, "enqueue"),
        *_locks(results),
        *_lint(results),
        *_recurrence(results),
        *history_section(_document(results, "history")),
        *_failed(results, "history"),
        *_commands(outcomes),
    ]
    return "\n".join(lines) + "\n"


def enqueue_section(document: dict[str, Any] | None) -> list[str]:
    """The "Enqueue" section from ``bench/enqueue.py``'s document (None: not measured)."""
    lines = ["", "## Enqueue", ""]
    if not document:
        return [*lines, "Not measured in this run."]
    jobs, pg, lite = document["jobs"], document["oncely"]["postgres"], document["oncely"]["sqlite"]
    peers = document["peers"]
    load = ", ".join(f"{value:.1f}" for value in document["load"])
    lines += [
        f"Putting {jobs:,} one-offs in from application code in one call, and one `app.defer` "
        f"at a time (`bench/enqueue.py`, {document['date']}, load average {load} at the end; "
        f"medians of {document['runs']} run{'s' if document['runs'] != 1 else ''}, each in a "
        "new database). Ratios are the peer's "
        "time ÷ oncely's: above 1, oncely is faster.",
        "",
        f"| bulk, {jobs:,} one-offs | seconds | per second | pgqueuer ÷ this | "
        "procrastinate ÷ this |",
        "|---|--:|--:|--:|--:|",
    ]
    rows = [
        ("oncely `defer_many`, PostgreSQL", pg.get("bulk_s")),
        ("oncely `defer_many` with keys, PostgreSQL", pg.get("bulk_keyed_s")),
        ("oncely `defer_many`, SQLite", lite.get("bulk_s")),
        ("oncely `defer_many` with keys, SQLite", lite.get("bulk_keyed_s")),
        *((f"{PEER_NAMES[p]} ({info['settings']})", info.get("bulk_s"))
          for p, info in peers.items()),
    ]  # fmt: skip
    for title, figure in rows:
        seconds = None if figure is None else figure["median"]
        rate = None if not seconds else jobs / seconds
        ratios = [
            _ratio(peers.get(p, {}).get("bulk_s", {}).get("median"), seconds)
            for p in ("pgqueuer", "procrastinate")
        ]
        lines.append(f"| {title} | {_cell(seconds, '.3f')} | {_cell(rate)} | "
                     f"{ratios[0]} | {ratios[1]} |")  # fmt: skip
    lines += [
        "",
        f"| one `app.defer` on PostgreSQL ({document['calls']:,} calls) | p50 ms | p90 ms |",
        "|---|--:|--:|",
    ]
    for title, suffix in (("keyless", ""), ("with a key", "_keyed")):
        p50 = pg.get(f"single{suffix}_p50_ms", {}).get("median")
        p90 = pg.get(f"single{suffix}_p90_ms", {}).get("median")
        lines.append(f"| {title} | {_cell(p50, '.3f')} | {_cell(p90, '.3f')} |")
    floor = pg.get("commit_floor_p50_ms", {}).get("median")
    lines.append(
        f"| floor: a one-row INSERT and COMMIT through psycopg | {_cell(floor, '.3f')} | - |"
    )
    return [*lines, "", f"Command: `{document['command']}`."]


def replace_section(page: Path, section: Sequence[str]) -> None:
    """Replace ``page``'s section headed as ``section`` is (or add it before "Commands");
    ``section`` as the ``*_section`` functions give it, leading blank lines or not."""
    lines = page.read_text().split("\n")
    new = list(section)
    while new and not new[0]:
        del new[0]
    heading = new[0]
    if heading in lines:
        start = lines.index(heading)
        end = next(
            (n for n in range(start + 1, len(lines)) if lines[n].startswith("## ")), len(lines)
        )
        lines[start:end] = [*new, ""]
    else:
        at = lines.index("## Commands") if "## Commands" in lines else len(lines)
        lines[at:at] = [*new, ""]
    page.write_text("\n".join(lines))
