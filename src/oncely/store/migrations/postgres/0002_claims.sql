-- What the engine's claims and overlap checks need.

-- Occurrences still in progress (waiting, running or between retries), per schedule: the overlap
-- check and the per-schedule serial claim read this instead of the whole history.
CREATE INDEX oncely_occurrences_in_progress ON oncely_occurrences (schedule_id)
    WHERE status IN ('pending', 'running', 'retrying');

-- A running occurrence without a lease could never expire and would stay "running" forever
-- (DESIGN lesson 2).
ALTER TABLE oncely_occurrences ADD CONSTRAINT oncely_occurrences_running_has_lease
    CHECK (status <> 'running' OR (lease_expires_at IS NOT NULL AND fence IS NOT NULL));
