"""The "Real handlers" section of ``docs/performance.md``, from ``bench/handlers.py``'s document,
and the one way a bench script replaces its own section of that page."""

from __future__ import annotations

from typing import Any

TITLES = {
    "oncely": "oncely at_least_once",
    "oncely-transactional": "oncely transactional (`run.connection`)",
    "pgqueuer": "pgqueuer",
    "procrastinate": "procrastinate",
    "bare": "bare loop, no scheduler (the limit)",
}
HEADING = "## Real handlers"


def _cell(value: Any, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def _ratio(ours: Any, theirs: Any) -> str:
    return "-" if ours is None or not theirs else f"{ours / theirs:.2f}"


def handlers_section(document: dict[str, Any] | None) -> list[str]:
    """The section's lines, heading first (None: not measured)."""
    lines = [HEADING, ""]
    if not document:
        return [*lines, "Not measured in this run."]
    results = document["results"]
    load = ", ".join(f"{value:.1f}" for value in document["load"])
    runs = document["runs"]
    lines += [
        f"{document['jobs']:,} one-offs due now, each handler one autocommit `INSERT` of its "
        f"job's key through a connection from its process's pool of {document['handlers']} "
        "(psycopg), at most that many handlers at once per process; the transactional variant "
        "writes it through `run.connection`, committed with the booking. The bare loop is the "
        "same INSERTs from as many threads and connections with no scheduler: what this machine "
        f"and server can do (`bench/handlers.py`, {document['date']}, load average {load} at the "
        f"end; medians of {runs} run{'s' if runs != 1 else ''}, each on a copy of a template "
        "database; dup and miss: the worst run; RSS: the largest peak of a worker process). "
        "Commits: this database's, per job; WAL syncs and bytes: the whole server's, per job "
        "(other databases' work on a shared server shows in them); CPU: milliseconds per job "
        "of the worker processes (all threads) and of their server backends.",
        "",
        "| scheduler | workers | handlers each | jobs | jobs/s | ÷ pgqueuer | ÷ procrastinate "
        "| share of the limit | commits/job | WAL syncs/job | WAL bytes/job | worker CPU ms/job "
        "| server CPU ms/job | peak RSS MB | dup | miss | load |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for count in map(str, document["workers"]):

        def rate(subject: str, count: str = count) -> Any:
            entry = results.get(subject, {}).get(count)
            return None if entry is None else entry["median"]["jobs_per_s"]

        for subject, title in TITLES.items():
            entry = results.get(subject, {}).get(count)
            if entry is None:
                continue
            med = entry["median"]
            ours = med["jobs_per_s"]
            share = None if ours is None or not rate("bare") else ours / rate("bare")
            lines.append(
                f"| {title} | {count} | {med['handlers_per_process']} | {med['jobs']:,} "
                f"| {_cell(ours)} | {_ratio(ours, rate('pgqueuer'))} "
                f"| {_ratio(ours, rate('procrastinate'))} "
                f"| {_cell(share, '.0%')} | {_cell(med['commits_per_job'], '.2f')} "
                f"| {_cell(med['wal_syncs_per_job'], '.2f')} "
                f"| {_cell(med['wal_bytes_per_job'])} "
                f"| {_cell(med['worker_cpu_ms_per_job'], '.3f')} "
                f"| {_cell(med['server_cpu_ms_per_job'], '.3f')} "
                f"| {_cell(med['peak_rss_mb'], '.0f')} "
                f"| {med['duplicates']} | {med['missing']} | {_cell(med['load'], '.1f')} |"
            )
    cpu = _cpu_lines(results, document["workers"], document.get("cores"))
    lag = _lag_lines(document.get("lag"), results.get("bare", {}))
    return [*lines, *cpu, *lag, "", f"Command: `{document['command']}`."]


def _cpu_lines(results: dict[str, Any], workers: list[int], cores: int | None) -> list[str]:
    """What bounds the share of the limit when the workers and the server share this machine's
    cores and use them all: the CPU a job costs in all, the bare loop's against oncely's."""

    def cpu(subject: str, count: int) -> float | None:
        med = results.get(subject, {}).get(str(count), {}).get("median", {})
        parts = (med.get("worker_cpu_ms_per_job"), med.get("server_cpu_ms_per_job"))
        return None if None in parts else parts[0] + parts[1]

    said = []
    for count in workers:
        bare, ours = cpu("bare", count), cpu("oncely", count)
        if bare and ours:
            said.append(
                f"with {count} worker process{'es' if count != 1 else ''}, the bare loop's "
                f"{bare:.3f} ms against oncely at_least_once's {ours:.3f} ms: about "
                f"{bare / ours:.0%} of the limit"
            )
    if not said:
        return []
    machine = f"this machine's {cores} cores" if cores else "this machine's cores"
    return [
        "",
        f"What bounds the share of the limit: the workers and the server run on {machine}, "
        "and both workloads keep them nearly busy, so jobs/s go about as the inverse of the CPU "
        "one job costs in all (the worker and server columns added): "
        + "; ".join(said)
        + ". The bare loop's is the INSERT alone; oncely's adds the claim and the booking of "
        "each job, two row versions in the scheduler's table written by the server, and the "
        "claim decoded in Python.",
    ]


def _lag_lines(lag: dict[str, Any] | None, bare: dict[str, Any]) -> list[str]:
    """The lag table under the burst's, when this run measured it, and the least lag the bare
    loop's rate allows: a second's occurrences all come due at once, and nothing can start the
    last of them before that many INSERTs are done."""
    if not lag:
        return []
    med = lag["median"]
    target = lag["target_p99_ms"]
    verdict = "met" if med["p99_ms"] is not None and med["p99_ms"] < target else "missed"
    limit = bare.get(str(lag["workers"]), {}).get("median", {}).get("jobs_per_s")
    floor = []
    if limit:
        floor = [
            "",
            f"The limit beside it: the bare loop above, with {lag['workers']} processes, does "
            f"{limit:,.0f} INSERTs a second, so the {lag['schedules']:,} INSERTs due at one "
            f"instant take it {lag['schedules'] / limit * 1000:,.0f} ms. With no scheduler at "
            "all, the last of a second's handlers starts that late at best.",
        ]
    return [
        "",
        f"Lag with this handler: {lag['schedules']:,} schedules every second run by "
        f"{lag['workers']} worker processes of {lag['concurrency']} handlers each, every "
        "handler INSERTing its key as above (bench/worker.py's recurring lag, "
        f"`--handler insert`); {lag['seconds']:.0f} s per run without the first and last "
        f"{lag['margin']:.0f} s, medians of {len(lag['runs'])} runs. Lag = handler start - "
        f"scheduled_for. Target p99 under {target} ms: {verdict}.",
        "",
        "| p50 ms | p90 ms | p99 ms | max ms | due | ran | dup | miss | worker CPU (cores) |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        f"| {_cell(med['p50_ms'], '.1f')} | {_cell(med['p90_ms'], '.1f')} "
        f"| {_cell(med['p99_ms'], '.1f')} | {_cell(med['max_ms'], '.1f')} | {med['due']:,.0f} "
        f"| {med['ran']:,.0f} | {med['duplicates']} | {med['misses']} "
        f"| {_cell(med['worker_cores'], '.2f')} |",
        *floor,
    ]
