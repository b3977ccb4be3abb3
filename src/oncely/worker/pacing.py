"""Pacing: how early to prepare a due time (the lead), and how many claims to hold waiting for a
handler slot (the prefetch). Each number is measured, within bounds, not configured."""

from __future__ import annotations

# Materialising starts this many times as long before a due time as the last one took,
# within these bounds: rows written ahead are at most LEAD_MAX early (a claim too late for its
# misfire policy skips them; see Executor.start).
LEAD_FACTOR = 1.5
LEAD_MIN = 0.02
LEAD_MAX = 2.0
# A shorter prepare shrinks the lead by at most this factor: a quick one (the other worker had
# written the rows, or none could be claimed) cut it to 20 ms, and when this worker next wrote
# all of a second's 2,500 rows itself, they started half a second late.
LEAD_DECAY = 0.9
# Claims waiting for a handler slot: about what the handlers get through in HORIZON_S, at
# least one per slot, at most PREFETCH_MAX. More than twice that are given back for other
# workers: a process that had claimed a burst of quick occurrences sat on the slow ones that
# followed while an idle worker next to it had nothing to do. The cap is above what quick
# handlers get through in one turn of the loop: at 1,024 they sat idle for half of every turn.
HORIZON_S = 1.0
PREFETCH_MAX = 4096
# A prepare of what is due now writes for at most this long, then claims, and goes on with the
# rest next turn: a worker that started with 6,000 overdue schedules wrote for two seconds before
# it ran anything, and its every-second schedules skipped the seconds meanwhile.
CATCH_UP_S = 0.2
# Something due that this worker cannot claim yet (an occurrence buffered behind one another
# worker runs) would otherwise wake the loop again at once, forever.
NOT_OURS_S = 5.0


class Lead:
    """How many seconds before a due time to start preparing it: `LEAD_FACTOR` times what a
    prepare took, growing at once with a longer one and shrinking by at most `LEAD_DECAY` per
    shorter one, within `LEAD_MIN` and `LEAD_MAX`."""

    def __init__(self) -> None:
        self.seconds = LEAD_MIN

    def learn(self, took: float) -> None:
        wanted = max(LEAD_FACTOR * took, LEAD_DECAY * self.seconds)
        self.seconds = min(max(wanted, LEAD_MIN), LEAD_MAX)


def prefetch(concurrency: int, duration: float | None) -> int:
    """Claims to hold waiting for a slot, for handlers taking ``duration`` seconds each (None:
    none measured yet): what they get through in `HORIZON_S`, within ``concurrency`` and
    `PREFETCH_MAX`. Quick handlers get a long queue (a thousand occurrences due at once took
    sixty claims of sixteen); slow ones a short one, so one worker does not sit on occurrences
    an idle one could run."""
    if duration is None:
        return concurrency
    per_horizon = concurrency * HORIZON_S / max(duration, 1e-6)
    return int(min(max(per_horizon, concurrency), PREFETCH_MAX))
