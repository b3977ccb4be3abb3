-- What the engine's claims and overlap checks need.

-- Occurrences still in progress (waiting, running or between retries), per schedule: the overlap
-- check and the per-schedule serial claim read this instead of the whole history.
-- (SQLite cannot add a CHECK to an existing table; the claim query spells out the NULL arm of
-- lease_expires_at instead, treating a missing lease as expired.)
CREATE INDEX oncely_occurrences_in_progress ON oncely_occurrences (schedule_id)
    WHERE status IN ('pending', 'running', 'retrying');
