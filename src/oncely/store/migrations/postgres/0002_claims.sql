-- What the engine's claims and overlap checks need.

-- Occurrences still in progress (waiting, running or between retries), per schedule: the overlap
-- check and the per-schedule serial claim read this instead of the whole history.
CREATE INDEX oncely_occurrences_in_progress ON oncely_occurrences (schedule_id)
    WHERE status IN ('pending', 'running', 'retrying');

-- A running occurrence without a lease could never expire and would stay "running" forever
-- (DESIGN lesson 2).
ALTER TABLE oncely_occurrences ADD CONSTRAINT oncely_occurrences_running_has_lease
    CHECK (status <> 'running' OR (lease_expires_at IS NOT NULL AND fence IS NOT NULL));

-- Fencing tokens come from one sequence: strictly increasing per schedule, as they must be, and
-- taken without writing the schedule's row on every claim.
CREATE SEQUENCE oncely_fences AS bigint;
ALTER TABLE oncely_schedules DROP COLUMN fence;

-- Claims take the oldest due occurrences first, ORDER BY run_after, id LIMIT n: with the id in
-- the index the scan stops after n rows. Without it every claim sorted the whole backlog, and
-- draining a burst cost time quadratic in its size.
DROP INDEX oncely_occurrences_claimable;
CREATE INDEX oncely_occurrences_claimable ON oncely_occurrences (run_after, id)
    WHERE status IN ('pending', 'retrying');
