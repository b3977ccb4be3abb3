-- What the engine's claims and overlap checks need.

-- Occurrences still in progress (waiting, running or between retries), per schedule: the overlap
-- check and the per-schedule serial claim read this instead of the whole history.
-- (SQLite cannot add a CHECK to an existing table; the claim query spells out the NULL arm of
-- lease_expires_at instead, treating a missing lease as expired.)
CREATE INDEX oncely_occurrences_in_progress ON oncely_occurrences (schedule_id)
    WHERE status IN ('pending', 'running', 'retrying');

-- Fencing tokens come from one counter: strictly increasing per schedule, as they must be, and
-- taken once per claimed batch.
CREATE TABLE oncely_fences (
    id    integer PRIMARY KEY CHECK (id = 1),
    value integer NOT NULL
) STRICT;
INSERT INTO oncely_fences (id, value) VALUES (1, 0);
ALTER TABLE oncely_schedules DROP COLUMN fence;

-- Claims take the oldest due occurrences first, ORDER BY run_after, id LIMIT n: with the id in
-- the index the scan stops after n rows. Without it every claim sorted the whole backlog, and
-- draining a burst cost time quadratic in its size.
DROP INDEX oncely_occurrences_claimable;
CREATE INDEX oncely_occurrences_claimable ON oncely_occurrences (run_after, id)
    WHERE status IN ('pending', 'retrying');
