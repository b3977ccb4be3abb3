"""Next-occurrence cost of oncely's triggers, for series started 1 day and 10 years ago.

Measures calls per second of ``trigger.next_after(t)`` for two cron expressions, ``every``, and
RFC 5545 rules with BYDAY/BYSETPOS/INTERVAL/COUNT in Europe/Berlin. Each RRULE is measured twice:
with ``start=`` one day before "now" and ten years before it. oncely re-anchors a rule near the
time asked about instead of walking from DTSTART (a COUNT rule resumes from a checkpoint that
carries its ordinal), so the two figures should be about equal. dateutil's own ``rrule.after()``,
which walks from DTSTART, is measured the same way as the peer reference.

"Now" is fixed (2026-11-29T12:00Z) and passed explicitly. Query times are ``now + i * step``
seconds for i cycling through 0..999, so no single cached answer is measured. Triggers are built
once, outside the timed loop; the first call after building one (for a COUNT rule, the one walk of
its series up to "now") is timed separately. Every figure is the median of ``--runs`` runs, each a
``time.perf_counter`` timed loop sized to last about 0.3 s.

The "cost 10y/1d" column is the time per call of the 10-year-old series over that of the
1-day-old one: 1.0 means the cost does not depend on the series' age, 100 means it is 100 times
slower.

Run it from the project root::

    .venv/bin/python bench/recurrence.py                  # full run, about a minute
    .venv/bin/python bench/recurrence.py --quick --runs 1 # smoke test, about a second
    .venv/bin/python bench/recurrence.py --json bench.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from dateutil import rrule as du

from oncely.recurrence import DEFAULT_MAX_SPAN, cron, every, rrule

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TZ = "Europe/Berlin"
CYCLE = 1000
AGES: dict[str, timedelta] = {"1d": timedelta(days=1), "10y": timedelta(days=3652)}

CRONS: tuple[tuple[str, str], ...] = (("0 9 * * MON-FRI", TZ), ("*/5 * * * *", "UTC"))
RRULES: tuple[str, ...] = (
    "FREQ=DAILY;BYHOUR=9",
    "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE,FR;BYHOUR=9",
    "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18",
    "FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU",
    "FREQ=HOURLY;INTERVAL=3",
    "FREQ=DAILY;COUNT=20000;BYHOUR=9",
)
PEER_RULE = "FREQ=DAILY;BYHOUR=9"

Query = Callable[[datetime], datetime | None]
# Builds the function to time, given the series' start (None for triggers that have none).
Factory = Callable[[datetime | None], Query]


@dataclass(frozen=True)
class Case:
    label: str
    factory: Factory
    aged: bool  # measured for series started 1 day and 10 years ago
    first_call: bool = False  # also time the first call after building


@dataclass
class Result:
    label: str
    calls_per_s: dict[str, float]  # "1d"/"10y", or "-" for triggers without a start
    first_call_ms: dict[str, float] = field(default_factory=dict)

    @property
    def cost_ratio(self) -> float | None:
        """Time per call of the 10-year-old series over the 1-day-old one."""
        if "10y" not in self.calls_per_s:
            return None
        return self.calls_per_s["1d"] / self.calls_per_s["10y"]


def _oncely_cron(expr: str, tz: str) -> Factory:
    return lambda _start: cron(expr, tz).next_after


def _oncely_rrule(text: str) -> Factory:
    def build(start: datetime | None) -> Query:
        # A rule with its own COUNT is bounded by it; the others are declared perpetual, else the
        # 10-year-old series would have stopped at the default max_span (366 days).
        max_span = DEFAULT_MAX_SPAN if "COUNT=" in text else None
        return rrule(text, start=start, tz=TZ, max_span=max_span).next_after

    return build


def _dateutil_rrule(text: str) -> Factory:
    def build(start: datetime | None) -> Query:
        assert start is not None
        dtstart = start.astimezone(ZoneInfo(TZ)).replace(microsecond=0)
        rule = du.rrulestr(text, dtstart=dtstart, cache=False)
        assert isinstance(rule, du.rrule)

        def after(t: datetime) -> datetime | None:
            found: datetime | None = rule.after(t)
            return found

        return after

    return build


def cases() -> list[Case]:
    """Every row of the table, in order."""
    rows = [Case(f'cron "{expr}" {tz}', _oncely_cron(expr, tz), False) for expr, tz in CRONS]
    rows.append(Case("every(minutes=5)", lambda _start: every(minutes=5).next_after, False))
    rows += [Case(f"rrule {text}", _oncely_rrule(text), True, True) for text in RRULES]
    rows.append(Case(f"dateutil .after() {PEER_RULE} (peer)", _dateutil_rrule(PEER_RULE), True))
    return rows


def _loop(fn: Query, queries: Sequence[datetime], calls: int) -> float:
    it = itertools.islice(itertools.cycle(queries), calls)
    start = time.perf_counter()
    for t in it:
        fn(t)
    return time.perf_counter() - start


def calls_per_second(fn: Query, queries: Sequence[datetime], runs: int, target_s: float) -> float:
    """Median over ``runs`` of calls/s, each run a loop sized to last about ``target_s``."""
    calls = 1
    while True:  # calibrate (and warm up): double until a loop lasts a tenth of the target
        elapsed = _loop(fn, queries, calls)
        if elapsed >= target_s / 10:
            break
        calls *= 2
    calls = max(1, round(calls * target_s / elapsed))
    return statistics.median(calls / _loop(fn, queries, calls) for _ in range(runs))


def first_call_ms(factory: Factory, start: datetime, runs: int) -> float:
    """Median over ``runs`` of the first ``next_after(now)`` on a freshly built trigger."""
    times = []
    for _ in range(runs):
        fn = factory(start)
        begin = time.perf_counter()
        fn(NOW)
        times.append(time.perf_counter() - begin)
    return statistics.median(times) * 1e3


def check_against_dateutil() -> list[str]:
    """Return the rules whose first answer after "now" differs from dateutil's expansion.

    Nothing near "now" is close to a DST change, so the two must agree.
    """
    wrong = []
    for text in RRULES:
        for age, delta in AGES.items():
            ours = _oncely_rrule(text)(NOW - delta)(NOW)
            theirs = _dateutil_rrule(text)(NOW - delta)(NOW)
            if ours != theirs:
                wrong.append(f"{text} started {age} ago: oncely {ours}, dateutil {theirs}")
    return wrong


def measure(runs: int, quick: bool, step_s: float) -> list[Result]:
    target_s = 0.005 if quick else 0.3
    queries = [NOW + timedelta(seconds=i * step_s) for i in range(CYCLE)]
    results = []
    for case in cases():
        if not case.aged:
            fn = case.factory(None)
            results.append(Result(case.label, {"-": calls_per_second(fn, queries, runs, target_s)}))
            continue
        result = Result(case.label, {})
        for age, delta in AGES.items():
            start = NOW - delta
            if case.first_call:
                result.first_call_ms[age] = first_call_ms(case.factory, start, runs)
            fn = case.factory(start)
            fn(NOW)  # the one-off cost (a COUNT rule's walk) is in first_call_ms, not here
            result.calls_per_s[age] = calls_per_second(fn, queries, runs, target_s)
        results.append(result)
    return results


def format_tables(results: Sequence[Result]) -> str:
    width = max(len(r.label) for r in results)
    lines = [
        f"{'rule':<{width}}  {'calls/s 1d':>12}  {'calls/s 10y':>12}  {'cost 10y/1d':>11}",
        f"{'-' * width}  {'-' * 12}  {'-' * 12}  {'-' * 11}",
    ]
    for r in results:
        if "-" in r.calls_per_s:
            lines.append(f"{r.label:<{width}}  {r.calls_per_s['-']:>12,.0f}  {'':>12}  {'':>11}")
        else:
            ratio = r.cost_ratio
            assert ratio is not None
            lines.append(
                f"{r.label:<{width}}  {r.calls_per_s['1d']:>12,.0f}  "
                f"{r.calls_per_s['10y']:>12,.0f}  {ratio:>11.2f}"
            )
    firsts = [r for r in results if r.first_call_ms]
    if firsts:
        lines += [
            "",
            "first call after building the trigger (ms; a COUNT rule walks its series once here)",
            f"{'rule':<{width}}  {'1d':>12}  {'10y':>12}",
            f"{'-' * width}  {'-' * 12}  {'-' * 12}",
        ]
        lines += [
            f"{r.label:<{width}}  {r.first_call_ms['1d']:>12.3f}  {r.first_call_ms['10y']:>12.3f}"
            for r in firsts
        ]
    return "\n".join(lines)


def to_json(results: Sequence[Result], args: argparse.Namespace) -> dict[str, Any]:
    return {
        "now": NOW.isoformat(),
        "tz": TZ,
        "ages_days": {age: delta.days for age, delta in AGES.items()},
        "runs": args.runs,
        "quick": args.quick,
        "step_s": args.step,
        "python": platform.python_version(),
        "dateutil": metadata.version("python-dateutil"),
        "cronsim": metadata.version("cronsim"),
        "results": [
            {
                "rule": r.label,
                "calls_per_s": r.calls_per_s,
                "cost_ratio_10y_1d": r.cost_ratio,
                "first_call_ms": r.first_call_ms or None,
            }
            for r in results
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (median; default 5)")
    parser.add_argument("--quick", action="store_true", help="few calls per run: a smoke test")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results here")
    parser.add_argument(
        "--step",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="distance between successive query times (default 1; cycle of 1000)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    wrong = check_against_dateutil()
    for line in wrong:
        print(f"MISMATCH with dateutil: {line}", file=sys.stderr)

    results = measure(args.runs, args.quick, args.step)
    print(
        f"next_after() calls/s, median of {args.runs} run(s); now={NOW.isoformat()}, "
        f"rules in {TZ}, series started 1 day / 10 years before now"
        + (" [--quick: not a measurement]" if args.quick else "")
    )
    print(format_tables(results))
    if args.json is not None:
        args.json.write_text(json.dumps(to_json(results, args), indent=2) + "\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
