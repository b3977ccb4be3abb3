"""The "History at scale" section of ``docs/performance.md``, from ``bench/history.py``'s
document: pure formatting, written by that script's ``--write`` and by ``bench/report.py``."""

from __future__ import annotations

from typing import Any

STORE_NAMES = {"postgres": "PostgreSQL", "sqlite": "SQLite"}
TARGET_RATIO = 1.2


def _mb_per_million(size: int | None, occurrences: int) -> str:
    return "-" if size is None else f"{size / 1e6 * 1e6 / occurrences:,.1f}"


def _reads(store: str, by_scale: dict[str, Any]) -> list[str]:
    scales = list(by_scale)
    first, rest = scales[0], scales[1:]
    head = f"| {STORE_NAMES[store]}, ms | " + " | ".join(scales)
    head += "".join(f" | {s} ÷ {first}" for s in rest) + " |"
    lines = [head, "|---|" + "--:|" * (len(scales) + len(rest))]
    for operation, base in by_scale[first]["reads_ms"].items():
        cells = [f"{by_scale[s]['reads_ms'][operation]:,.2f}" for s in scales]
        ratios = []
        for s in rest:
            ratio = by_scale[s]["reads_ms"][operation] / base
            ratios.append(f"{ratio:.2f}" + ("" if ratio < TARGET_RATIO else " (over)"))
        lines.append(f"| {operation} | " + " | ".join(cells + ratios) + " |")
    return lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _retention(document: dict[str, Any]) -> list[str]:
    lines = [
        "| store | scale | rows in the day | sweep s | calls | longest call ms | "
        "bulk DELETE s | bulk ÷ sweep | then VACUUM s | most locks held (sweep / bulk) |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for store, by_scale in document["stores"].items():
        for scale, figures in by_scale.items():
            kept = figures["retention"]
            swept, bulk = kept["sweep"], kept["bulk"]
            locks = (
                f"{swept['most_locks']} / {bulk['most_locks']} "
                f"({', '.join(sorted(set(swept['modes']) | set(bulk['modes']))) or 'none seen'})"
                if store == "postgres"
                else "the database's write lock, per transaction"
            )
            lines.append(
                f"| {STORE_NAMES[store]} | {scale} | {swept['rows']:,} | {swept['seconds']:.2f} "
                f"| {swept['batches']:,} | {swept['longest_ms']:,.0f} | {bulk['seconds']:.2f} "
                f"| {bulk['seconds'] / swept['seconds']:,.1f} "
                f"| {_seconds(bulk.get('vacuum_seconds'))} | {locks} |"
            )
    return lines


def _sizes(document: dict[str, Any]) -> list[str]:
    lines = [
        "| store | scale | occurrence table MB per million | heap | all its indexes | "
        "whole database | measured with |",
        "|---|---|--:|--:|--:|--:|---|",
    ]
    indexes: dict[str, dict[str, str]] = {}
    for store, by_scale in document["stores"].items():
        for scale, figures in by_scale.items():
            n, size = figures["occurrences"], figures["sizes"]
            lines.append(
                f"| {STORE_NAMES[store]} | {scale} | {_mb_per_million(size['table'], n)} | "
                f"{_mb_per_million(size['heap'], n)} | {_mb_per_million(size['indexes'], n)} | "
                f"{_mb_per_million(size['database'], n)} | {size['method']} |"
            )
            for name, each in size["each"].items():
                indexes.setdefault(name, {})[f"{STORE_NAMES[store]} {scale}"] = _mb_per_million(
                    each, n
                )
    if indexes:
        columns = list(dict.fromkeys(c for by in indexes.values() for c in by))
        lines += ["", "| index, MB per million | " + " | ".join(columns) + " |",
                  "|---|" + "--:|" * len(columns)]  # fmt: skip
        for name, by in indexes.items():
            lines.append(f"| `{name}` | " + " | ".join(by.get(c, "-") for c in columns) + " |")
    return lines


def history_section(document: dict[str, Any] | None) -> list[str]:
    """The "History at scale" section (None: not measured), with its leading blank line."""
    lines = ["", "## History at scale", ""]
    if not document:
        return [*lines, "Not measured in this run."]
    runs = document["runs"]
    loads = {
        f"{STORE_NAMES[store]} {scale}": figures["load"]
        for store, by_scale in document["stores"].items()
        for scale, figures in by_scale.items()
    }
    load = ", ".join(f"{value:.1f} after {name}" for name, value in loads.items())
    lines += [
        f"The reads a worker, the CLI and the dashboard make, as stored history grows, and what "
        f"a day's retention costs (`bench/history.py`, {document['date']}, {document['machine']};"
        f" load average {document['load'][0]:.1f} at the start, {load}). Each database holds a "
        "tenth as many daily schedules as occurrences, ten days of history each, stored with "
        f"COPY (PostgreSQL) or executemany (SQLite); medians of {runs} run"
        f"{'s' if runs != 1 else ''} after a warm-up. PostgreSQL keeps occurrences in a "
        "partition per UTC day (schema 14); SQLite in one table. Target: each read under "
        f"{TARGET_RATIO} times its figure at the smallest scale.",
        "",
    ]
    for store, by_scale in document["stores"].items():
        if by_scale:
            lines += [*_reads(store, by_scale), ""]
    lines += [
        "Retention: one day of history pruned as housekeeping does (`prune(before, 1000)` until "
        "a call comes back short: on PostgreSQL the day's partition detached concurrently and "
        "dropped, on SQLite batches of 1,000 rows), against one bulk `DELETE` with the same "
        "predicate of the next day (as many rows), the order alternating run by run. The "
        "longest call is the longest transaction, what a writer waiting on those rows could "
        "wait; the bulk `DELETE` is one transaction. Bulk ÷ sweep is how many times faster "
        "the sweep is. On PostgreSQL a `VACUUM` gives back the rows a `DELETE` leaves (timed "
        "after it, on the whole table); a dropped partition leaves none. Locks: the most the "
        "other backends held at once, sampled every 10 ms (row locks are not in `pg_locks`; the "
        "relation locks are).",
        "",
        *_retention(document),
        "",
        "Sizes when filled, before any delete (a table that has churned holds more dead space):",
        "",
        *_sizes(document),
    ]
    for skipped in document["skipped"]:
        lines.append(
            f"\n{STORE_NAMES[skipped['store']]} {skipped['scale']} not measured: "
            f"{skipped['reason']}."
        )
    return [*lines, "", f"Command: `.venv/bin/python {document['command']}`."]
