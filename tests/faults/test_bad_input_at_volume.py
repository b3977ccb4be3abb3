"""Bad input at volume: thousands of generated schedules with hostile rules, zones, payloads and
keys, saved through the API and run by two `oncely run` processes with the ones that are fine.

Each one gets what it should: a clear error from ``app.schedule`` (an `oncely.OncelyError`
naming what is wrong, on a line a person can read), or, for a stored rule that no longer reads
(written by hand or by an older version), the status ``invalid`` with its reason once a worker
meets it. Hostile input that is valid -- unicode keys, 1 MB payloads, ``FREQ=SECONDLY`` with no
end (bounded by ``max_span``) -- is kept, and fires. Required too: the schedules that fire
keep firing on time, every occurrence once, also while the workers meet the bad rules (counted
on a line of its own: 2,500 of them once held the schedules due with them up for 12 s).

Short (``make test``): 1,000 schedules; long (``make faults``): 10,000.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from _faults import Row, effects, fault_workers, history, prepare, runs, scaled, scheduling_app

import oncely
from _processes import json_lines, terminate, wait_until

SCHEDULES = int(scaled(1_000, 10_000))
SECONDLY = int(scaled(20, 50))
RUN_S = scaled(8.0, 30.0)
EDGE_S = 2
# Fired this much after its time, an occurrence is late (claims are taken ahead of their time;
# the margin is for two workers sharing two cores with PostgreSQL and other test runs).
ON_TIME_S = 2.0
MB = 1_000_000

ZONES = [
    "Mars/Olympus", "../../etc/passwd", "UTC+99", "Europe/Berlin\x00", " ", "Europe/" + "x" * 300,
    "🙂", "America/New_York;DROP TABLE oncely_schedules", "Etc/GMT+99", "Europe//Paris",
]  # fmt: skip
GARBAGE_RULES = [
    "FREQ=SOMETIMES", "FREQ=DAILY;BYHOUR=99", "FREQ=DAILY;INTERVAL=0", "BYDAY=MO", "",
    "FREQ=DAILY;" + "BYHOUR=1;" * 500, "FREQ=WEEKLY;BYDAY=XX", "FREQ=DAILY;COUNT=-1",
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "FREQ=DAILY;UNTIL=yesterday", "DTSTART:1;FREQ=DAILY",
    "FREQ=MONTHLY;BYSETPOS=0;BYDAY=MO", "\x00", "FREQ=DAILY;BYMINUTE=" + ",".join(["1"] * 2000),
]  # fmt: skip
BAD_CRONS = ["61 * * * *", "* * * * * * *", "", "0 25 * * *", "*/0 * * * *", "0 9 * * MON-XYZ"]
STORED_DAMAGE = [
    {"kind": "rrule", "v": 1, "text": "FREQ=SOMETIMES", "tz": "UTC"},
    {"kind": "rrule", "v": 1, "text": "FREQ=DAILY;COUNT=999999999999", "tz": "UTC"},
    {"kind": "rrule", "v": 1, "text": "FREQ=DAILY", "tz": "Mars/Olympus"},
    {"kind": "cron", "v": 1, "expr": "61 * * * *", "tz": "UTC"},
    {"kind": "cron", "v": 1, "expr": "0 9 * * *", "tz": "Europe/Atlantis"},
    {"kind": "every", "v": 1, "seconds": -5},
    {"kind": "every", "v": 1},
    {"kind": "teleport"},
    {"kind": "rrule", "v": 99, "text": "FREQ=DAILY", "tz": "UTC"},
    [],
    "FREQ=DAILY",
]
UNICODE = [
    "ключ", "🙂", "\U0001d4b3", "\u202e", "ß", "日本語", "e\u0301", "\u200d", "👩\u200d👩\u200d👧",
    "\ufdfa", " ", "\u3000", "'", '"', ";", "--", "%", "\\", "/", "*", "{", "}", ":", "#",
]  # fmt: skip
BAD = oncely.InvalidSchedule
# Periods that share no factor, so that thousands of schedules do not all fire on the same
# second each minute (a burst of its own, which this test is not about).
PERIODS = [2, 3, 5] if SCHEDULES <= 1_000 else [19, 23, 29, 31]


def _hourly() -> oncely.Trigger:
    return oncely.every(hours=1)


def _every_second() -> oncely.Trigger:
    return oncely.every(seconds=1)


def _deep(levels: int) -> list[Any]:
    top: list[Any] = []
    inner = top
    for _ in range(levels):
        inner.append([])
        inner = inner[0]
    return top


@dataclass
class Case:
    """One generated schedule: what to save, and what must become of it."""

    kind: str
    key: str
    trigger: Callable[[], oncely.Trigger]
    payload: Any = None
    # The error ``app.schedule`` must raise, and a word its message must hold; or None: saved.
    error: type[oncely.OncelyError] | None = None
    mentions: str = ""
    damage: Any = None  # a stored trigger spec that no longer reads, written after saving
    raised: BaseException | None = field(default=None, repr=False)


def _huge_count(rng: random.Random, key: str) -> Case:
    count = rng.choice([100_001, 10**6, 10**12, 2**63, 10**40])
    text = f"FREQ={rng.choice(['SECONDLY', 'DAILY', 'YEARLY'])};COUNT={count}"
    return Case("huge COUNT", key, lambda: oncely.rrule(text), None, BAD, "COUNT")


def _until_before_start(rng: random.Random, key: str) -> Case:
    past = datetime.now(UTC) - timedelta(days=rng.randint(1, 9000))
    text = f"FREQ={rng.choice(['_hourly', 'DAILY'])};UNTIL={past:%Y%m%dT%H%M%SZ}"
    return Case("UNTIL before start", key, lambda: oncely.rrule(text), None, BAD, "UNTIL")


def _unknown_zone(rng: random.Random, key: str) -> Case:
    zone = rng.choice(ZONES)
    if rng.random() < 0.5:
        return Case(
            "unknown zone", key, lambda: oncely.cron("0 9 * * *", tz=zone), None, BAD, "zone"
        )
    return Case("unknown zone", key, lambda: oncely.rrule("FREQ=DAILY", tz=zone), None, BAD, "zone")


def _unreadable_rule(rng: random.Random, key: str) -> Case:
    if rng.random() < 0.7:
        text = rng.choice(GARBAGE_RULES)
        return Case("unreadable rule", key, lambda: oncely.rrule(text), None, BAD)
    expr = rng.choice(BAD_CRONS)
    return Case("unreadable rule", key, lambda: oncely.cron(expr), None, BAD)


def _unstorable_payload(rng: random.Random, key: str) -> Case:
    payload = rng.choice(
        [{"x": float("nan")}, {"when": object()}, {(1, 2): 3}, {"x": "a\x00b"}, {"x": "\ud800"},
         _deep(100_000), 10**5000]
    )  # fmt: skip
    return Case("unstorable payload", key, _hourly, payload, oncely.InvalidPayload, "payload")


def _unstorable_key(rng: random.Random, key: str) -> Case:
    bad = rng.choice(["", "a\x00b", "\udcff", "k" * 5000, "\U0001f642" * 2000])
    return Case("unstorable key", bad, _hourly, None, BAD, "key")


def _stored_damage(rng: random.Random, key: str) -> Case:
    return Case("stored rule no longer reads", key, _every_second, damage=rng.choice(STORED_DAMAGE))


def _secondly(rng: random.Random, key: str) -> Case:
    return Case("FREQ=SECONDLY forever", key, lambda: oncely.rrule("FREQ=SECONDLY"))


def _megabyte(rng: random.Random, key: str) -> Case:
    payload = {"blob": "x" * MB, "key": key}
    return Case("1 MB payload", key, lambda: oncely.every(seconds=7), payload)


def _unicode_key(rng: random.Random, key: str) -> Case:
    word = "".join(rng.choices(UNICODE, k=rng.randint(1, 12)))
    period = rng.choice(PERIODS)
    return Case("unicode key", f"{key}:{word}", lambda: oncely.every(seconds=period))


def _fine(rng: random.Random, key: str) -> Case:
    period = rng.choice(PERIODS)
    return Case("fine", key, lambda: oncely.every(seconds=period))


# Parts of every thousand schedules. The ones that fire (unicode keys, fine, SECONDLY, 1 MB) make
# about 150 occurrences a second in the short version, 200 in the long one.
MIX: list[tuple[float, Callable[[random.Random, str], Case]]] = [
    (60, _huge_count),
    (60, _until_before_start),
    (60, _unknown_zone),
    (90, _unreadable_rule),
    (50, _unstorable_payload),
    (40, _unstorable_key),
    (260, _stored_damage),
    (SECONDLY * 1000 / SCHEDULES, _secondly),
    (5, _megabyte),
    (160, _unicode_key),
]


def _cases(rng: random.Random) -> list[Case]:
    makers = [make for _, make in MIX] + [_fine]
    weights = [weight for weight, _ in MIX]
    weights.append(1000 - sum(weights))
    return [rng.choices(makers, weights)[0](rng, f"case:{n}") for n in range(SCHEDULES)]


def _save(app: oncely.App, case: Case) -> None:
    try:
        app.schedule("at_least_once", case.trigger(), key=case.key, payload=case.payload)
    except BaseException as exc:  # anything but the expected OncelyError is a finding
        case.raised = exc


def _damage(url: str, cases: list[Case]) -> None:
    with psycopg.connect(url) as connection:
        connection.execute(
            "UPDATE oncely_schedules s SET trigger_spec = v.spec::jsonb "
            "FROM unnest(%s::text[], %s::text[]) AS v(key, spec) WHERE s.key = v.key",
            ([c.key for c in cases], [json.dumps(c.damage) for c in cases]),
        )


def _judge_error(case: Case) -> str | None:
    """What is wrong with what saving ``case`` did, or None."""
    exc = case.raised
    if case.error is None:
        return None if exc is None else f"refused: {type(exc).__name__}: {exc}"[:300]
    if exc is None:
        return f"accepted, expected {case.error.__name__}"
    message = str(exc)
    if not isinstance(exc, case.error):
        return f"{type(exc).__name__} instead of {case.error.__name__}: {message}"[:300]
    if case.mentions.lower() not in message.lower():
        return f"message does not mention {case.mentions!r}: {message}"[:300]
    if len(message) > 600 or "\n" in message:
        return f"message is not a line a person can read ({len(message)} chars)"
    return None


Occurrence = tuple[str, datetime]


@dataclass
class Timing:
    """How a set of occurrences fired: counts, and how late their first runs came."""

    occurrences: int
    missed: int  # never run
    silent: int  # never run and not recorded as skipped with a reason
    twice: int
    late_median: float
    late_max: float
    # What became of the missed ones: (kind, stored status, reason) -> how many.
    misses: Counter[tuple[str, str | None, str | None]]

    def __str__(self) -> str:
        return (
            f"{self.occurrences} occurrences, {self.missed} missed ({self.silent} silent), "
            f"{self.twice} twice, late by median {self.late_median:.2f} s, max "
            f"{self.late_max:.2f} s"
        )


def _timing(
    part: list[Occurrence],
    ran: Counter[Occurrence],
    rows: dict[Occurrence, Row],
    first_run: dict[Occurrence, float],
    kind_of: dict[str, str],
) -> Timing:
    lags = [first_run[o] - o[1].timestamp() for o in part if o in first_run]
    missed = [o for o in part if ran[o] == 0]
    stored = {o: (rows[o].status, rows[o].reason) if o in rows else (None, None) for o in missed}
    return Timing(
        occurrences=len(part),
        missed=len(missed),
        silent=sum(1 for o in missed if o not in rows or not rows[o].reason),
        twice=sum(1 for o in part if ran[o] > 1),
        late_median=statistics.median(lags) if lags else 0.0,
        late_max=max(lags, default=0.0),
        misses=Counter((kind_of[o[0]], *stored[o]) for o in missed),
    )


def _span(part: list[Occurrence]) -> str:
    if not part:
        return "none"
    times = [when for _, when in part]
    return f"{(max(times) - min(times)).total_seconds():.0f} s"


def test_thousands_of_hostile_schedules_get_their_error_or_invalid_and_the_rest_fire_on_time(
    postgres_url: str, tmp_path: Path, report: Callable[[str], None]
) -> None:
    prepare(postgres_url)
    app = scheduling_app(postgres_url)
    cases = _cases(random.Random(7))
    began = time.monotonic()
    for case in cases:
        _save(app, case)
    saved_s = time.monotonic() - began
    damaged = [c for c in cases if c.damage is not None]
    _damage(postgres_url, damaged)
    with fault_workers(postgres_url, tmp_path) as group:
        group.start()
        group.start()
        wait_until(group.ready, timeout=30, what="the workers to start")
        started = datetime.now(UTC)
        time.sleep(RUN_S)
        stopped = datetime.now(UTC) - timedelta(seconds=EDGE_S)
        time.sleep(EDGE_S)
        for process in group.alive():
            assert terminate(process, within=30)[0] == 0, group.output()
        logs = [line for p in group.started for line in json_lines(group.text_of(p))]
    schedules = {s.key: s for s in app.schedules()}
    occurrences = {o.key: o for o in app.history(status="invalid", limit=SCHEDULES)}
    app.close()
    found = effects(postgres_url, tmp_path)
    ran = runs(found)
    problems = [f"{c.kind} {c.key[:40]!r}: {p}" for c in cases if (p := _judge_error(c))]
    for case in damaged:
        schedule = schedules[case.key]
        if schedule.status != "invalid" or not schedule.status_reason:
            problems.append(f"{case.kind} {case.key}: {schedule.status}, not invalid")
        elif case.key not in occurrences:
            problems.append(f"{case.kind} {case.key}: no invalid occurrence in history")
    firing = [c for c in cases if c.error is None and c.damage is None]
    # Judged from a second after the workers started (what came due before ran late, rightly),
    # in two parts: while the workers were meeting the bad rules, and after.
    met = max(
        (datetime.fromisoformat(line["ts"]) for line in logs if line["level"] == "ERROR"),
        default=started,
    )
    meeting: list[Occurrence] = []
    after: list[Occurrence] = []
    for case in firing:
        trigger = schedules[case.key].trigger
        assert trigger is not None
        for instance in trigger.instances_within(started + timedelta(seconds=1), stopped):
            part = meeting if instance.at <= met + timedelta(seconds=1) else after
            part.append((case.key, instance.at))
    rows = history(postgres_url)
    first_run: dict[Occurrence, float] = {}
    for effect in sorted(found, key=lambda e: e.ran_at, reverse=True):
        first_run[effect.occurrence] = effect.ran_at
    whole = {
        c.key: f"payload={len(json.dumps(c.payload))}" for c in firing if c.kind == "1 MB payload"
    }
    torn = [e for e in found if e.key in whole and e.note != whole[e.key]]
    kinds = Counter(c.kind for c in cases)
    report(
        f"{len(cases)} schedules saved in {saved_s:.1f} s: "
        + ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    )
    report(
        f"{sum(1 for c in cases if c.error and isinstance(c.raised, c.error))} refused with their "
        f"error, {sum(1 for c in damaged if schedules[c.key].status == 'invalid')} invalid, "
        f"{len(problems)} problems; {len(firing)} firing; 1 MB payloads run "
        f"{sum(1 for e in found if e.key in whole)} times, {len(torn)} torn"
    )
    kind_of = {c.key: c.kind for c in cases}
    judged = {}
    for name, part in (("while meeting the bad rules", meeting), ("after", after)):
        judged[name] = _timing(part, ran, rows, first_run, kind_of)
        report(f"{name} ({_span(part)}): {judged[name]}")
    # The workers' only ERROR lines: one per schedule whose stored rule no longer reads.
    errors = [line["message"] for line in logs if line["level"] == "ERROR"]
    unexpected = [m for m in errors if "its stored trigger no longer reads" not in m]
    assert problems == [], f"{len(problems)} problems, the first: {problems[:10]}"
    for name, timing in judged.items():
        assert (timing.missed, timing.silent, timing.twice) == (0, 0, 0), (name, timing.misses)
        assert timing.late_max < ON_TIME_S, name
    assert all(
        s.trigger is not None and s.trigger.next_after(s.created_at + timedelta(days=367)) is None
        for c in firing
        if c.kind == "FREQ=SECONDLY forever"
        for s in [schedules[c.key]]
        if s.created_at is not None
    ), "a FREQ=SECONDLY rule with no end goes on past max_span"
    assert torn == []
    assert (len(errors), unexpected) == (len(damaged), []), unexpected[:5]
