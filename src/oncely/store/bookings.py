"""The outcome side of the store, once for both dialects: bookings, leases of claims, sweeps."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from oncely.arguments import FINAL_STATUSES
from oncely.model import Abandoned, Claim, Failure, Reclaimed, Skipped
from oncely.store import claiming, housekeeping, records
from oncely.store.dialect import Dialect


class Bookings(Dialect):
    """Bookings of claims and the sweeps of expired leases, written over `Dialect`'s hooks."""

    def extend_leases(self, leases: Sequence[tuple[Claim, datetime]]) -> set[int]:
        if not leases:
            return set()
        with self._writing() as connection:
            return self._ids(connection, "extend_leases", self._leases_until(leases))

    def book_success(self, claims: Sequence[Claim], now: datetime) -> list[Claim]:
        if not claims:
            return []
        with self._writing() as connection:
            # The statement tells open dashboards itself (notify_outcome).
            booked = self._ids(connection, "book_success", {**self._claims(claims), "now": now})
            done = [c for c in claims if c.occurrence_id in booked]
            streaks = sorted({c.schedule_id for c in done if c.failure_streak})
            if streaks:
                self._changed(connection, "reset_failures", {"ids": self._ints(streaks)})
        return done

    def book_skipped(self, claim: Claim, now: datetime, reason: str) -> bool:
        params = {**self._claim(claim), "now": now, "reason": reason}
        with self._writing() as connection:
            skipped = self._row(connection, "book_skipped", params) is not None
            if skipped:
                self._notify_outcome(connection)
        return skipped

    def book_failure(
        self,
        claim: Claim,
        now: datetime,
        *,
        error: str,
        retry_at: datetime | None,
        pause_after: int | None,
    ) -> Failure:
        params = {**self._claim(claim), "now": now, "error": error}
        with self._writing() as connection:
            if retry_at is not None:
                retry = {**params, "retry_at": retry_at, "kept": records.ATTEMPTS_KEPT}
                retried = self._row(connection, "book_retry", retry)
                if retried is not None:
                    self._keep_attempt(connection, claim.occurrence_id, "failed")
                    # The retry comes due sooner than a sleeping worker's next wake-up may be
                    # (the dashboard hears this notice too: no outcome notice besides).
                    self._notify(connection)
                return Failure(booked=retried is not None, final=False)
            failed = self._row(connection, "book_failed", params)
            if failed is None:
                return Failure(booked=False, final=True)
            count = {
                "schedule_id": failed["schedule_id"],
                "pause_after": pause_after,
                "now": now,
                "was_paused": failed.get("was_paused"),
            }
            counted = self._row(connection, "count_failure", count)
            self._notify_outcome(connection)
        assert counted is not None
        return Failure(
            booked=True,
            final=True,
            consecutive_failures=counted["consecutive_failures"],
            paused=bool(counted["paused"]),
            paused_now=bool(counted["paused_now"]),
        )

    def release(self, claims: Sequence[Claim], now: datetime) -> int:
        if not claims:
            return 0
        with self._writing() as connection:
            released = len(self._rows(connection, "release_claims", self._claims(claims)))
            if released:
                self._notify(connection)
        return released

    def mark_left_running(self, claims: Sequence[Claim], reason: str) -> int:
        if not claims:
            return 0
        params = {**self._claims(claims), "reason": reason}
        with self._writing() as connection:
            return len(self._rows(connection, "mark_left_running", params))

    def abandon_expired(
        self, *, now: datetime, jobs: Collection[str], reason: str
    ) -> list[Abandoned]:
        if not jobs:
            return []
        abandoned = []
        params = {"now": now, "jobs": self._texts(sorted(jobs))}
        with self._picked("expired_of_jobs", params) as (connection, found):
            for row in found:
                change = {
                    "id": row["id"],
                    "scheduled_for": row["scheduled_for"],
                    "fence": row["fence"],
                    "now": now,
                    "reason": reason,
                }
                # Reported only when changed: a worker slow but alive may have extended the
                # lease since it was read, and then it was not abandoned.
                if self._changed(connection, "abandon", change):
                    abandoned.append(records.abandoned(row))
        return abandoned

    def reclaim_expired(self, now: datetime, retries: Mapping[str, int]) -> list[Reclaimed]:
        if not retries:
            return []
        done: list[Reclaimed] = []
        params = {"now": now, "jobs": self._texts(sorted(retries))}
        with self._picked("reclaimable", params) as (connection, found):
            for row in found:
                decided = housekeeping.reclaim(row, retries[row["job"]], now)
                reclaim = {**decided.params, "kept": records.ATTEMPTS_KEPT}
                changed = self._row(connection, "reclaim", reclaim)
                if changed is None:
                    continue
                if decided.report.status == "retrying":
                    self._keep_attempt(connection, row["id"], "lost")
                if decided.report.status == "failed":
                    count = {
                        "schedule_id": changed["schedule_id"],
                        "pause_after": None,
                        "now": now,
                        "was_paused": None,
                    }
                    self._rows(connection, "count_failure", count)
                done.append(decided.report)
            if any(r.status == "retrying" for r in done):
                self._notify(connection)
        return done

    def fail_orphaned(
        self, now: datetime, jobs: Collection[str], lost_before: datetime
    ) -> list[Abandoned]:
        params = {"jobs": self._texts(sorted(jobs)), "lost_before": lost_before}
        failed = []
        with self._picked("orphaned", params) as (connection, found):
            for row in found:
                change = housekeeping.orphan_params(row, now, lost_before)
                if self._changed(connection, "fail_orphan", change):
                    failed.append(records.abandoned(row))
        return failed

    def prune(
        self, before: datetime, limit: int, *, by_status: Mapping[str, datetime] | None = None
    ) -> int:
        with self._writing() as connection:
            pruned = self._prune_occurrences(connection, final_cuts(before, by_status), limit)
            self._prune_the_rest(connection, before, limit)
        return pruned

    def _prune_occurrences(self, connection: Any, cuts: Mapping[str, datetime], limit: int) -> int:
        """Delete up to ``limit`` occurrences, of each final status before its time in
        ``cuts``, and raise the history horizon to the latest of those times, in one transaction:
        no defer may see them gone while the horizon is lower."""
        pruned = 0
        for cut in sorted(set(cuts.values())):
            statuses = sorted(status for status, its in cuts.items() if its == cut)
            params = {"before": cut, "limit": limit - pruned, "statuses": self._texts(statuses)}
            pruned += max(self._changed(connection, "prune_occurrences", params), 0)
            if pruned >= limit:
                break
        self._changed(connection, "raise_history_horizon", {"before": max(cuts.values())})
        return pruned

    def _prune_the_rest(self, connection: Any, before: datetime, limit: int) -> None:
        """Delete the keyless one-offs left without history, and the sweeps, before ``before``."""
        self._changed(connection, "prune_keyless_schedules", {"before": before, "limit": limit})
        self._changed(connection, "prune_sweeps", {"before": before})
        self._changed(connection, "prune_actions", {"before": before})

    def _keep_lost(
        self, connection: Any, admitted: Sequence[claiming.Candidate], now: datetime
    ) -> None:
        """Keep the attempts of lost workers that the ``admitted`` candidates reclaimed, before
        the claim starts the next attempt over them (and overwrites the row's)."""
        lost = [c for c in admitted if c.reclaimed]
        if lost:
            params = {**self._candidates_of(lost), "now": now, "kept": records.ATTEMPTS_KEPT}
            self._changed(connection, "keep_lost_attempts", params)

    def _candidates(
        self,
        connection: Any,
        name: str,
        jobs: Collection[str],
        now: datetime,
        due: datetime,
        limit: int,
        reclaimed: bool,
        exclude: Sequence[int] = (),
    ) -> list[claiming.Candidate]:
        """The occurrences query ``name`` offers to claim, of ``jobs``, none of ``exclude``'s
        schedules."""
        if not jobs:
            return []
        params = {
            "now": now,
            "due_by": due,
            "jobs": self._texts(sorted(jobs)),
            "limit": limit,
            "exclude": self._ints(exclude),
        }
        return [
            claiming.Candidate(
                row["id"],
                row["schedule_id"],
                row["job"],
                reclaimed,
                row["scheduled_for"],
                ahead=bool(row.get("ahead")),
                run_after=row.get("run_after"),
            )
            for row in self._rows(connection, name, params)
        ]

    def _admit(
        self,
        connection: Any,
        now: datetime,
        due: datetime,
        limit: int,
        reclaim: Collection[str],
        serial_jobs: Collection[str],
        skip: Collection[str],
    ) -> tuple[list[claiming.Candidate], list[Skipped]]:
        """Expired leases to rerun and occurrences of serial jobs to start, by
        `claiming.admit_in_rounds`; overlapped ones are skipped on the way, and returned as the
        second item (those this claim wrote skipped: another may have started one meanwhile)."""
        skipped: list[Skipped] = []

        def read(seen: Sequence[int], first: bool) -> tuple[list[claiming.Candidate], bool]:
            ready = self._candidates(
                connection, "claim_ready", serial_jobs, now, due, limit, False, seen
            )
            expired = []
            if first:
                expired = self._candidates(
                    connection, "claim_expired", reclaim, now, now, limit, True
                )
            return [*expired, *ready], len(ready) < limit

        def settle(
            candidates: list[claiming.Candidate], fresh: list[int]
        ) -> tuple[list[claiming.Candidate], set[int]]:
            candidates = self._held(connection, candidates, fresh)
            busy: set[int] = set()
            if any(c.job in serial_jobs for c in candidates):
                params = {"ids": self._ints(fresh), "now": now}
                busy = {
                    row["schedule_id"] for row in self._rows(connection, "busy_schedules", params)
                }
            overlapped = claiming.overlapped(candidates, skip, busy, now)
            if overlapped:
                skipping = {
                    **self._candidates_of(overlapped),
                    "reason": claiming.OVERLAP_SKIP_REASON,
                    "now": now,
                }
                written = self._rows(connection, "skip_overlapped", skipping)
                jobs = {c.occurrence_id: c.job for c in overlapped}
                skipped.extend(Skipped(jobs[row["id"]], "overlap") for row in written)
            return candidates, busy

        return claiming.admit_in_rounds(limit, serial_jobs, read, settle), skipped


def final_cuts(before: datetime, by_status: Mapping[str, datetime] | None) -> dict[str, datetime]:
    """Each final status with the time its history goes before: ``before``, or its own."""
    return {status: (by_status or {}).get(status, before) for status in FINAL_STATUSES}
