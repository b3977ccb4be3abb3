-- What the worker's housekeeping needs: named leases with fencing tokens, and its own record.

-- 0001's oncely_leases was never written to. A lease row holds the token of its current
-- acquisition; tokens come from a sequence rather than the row, so they keep increasing per name
-- when a released lease's row is deleted and the name is taken again.
ALTER TABLE oncely_leases RENAME COLUMN fence TO token;
ALTER TABLE oncely_leases DROP COLUMN acquired_at;
CREATE SEQUENCE oncely_lease_tokens AS bigint;

-- One row per housekeeping pass ("history of its own kind"), pruned with the occurrences.
CREATE TABLE oncely_sweeps (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    worker      text        NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    pruned      integer     NOT NULL,
    reclaimed   integer     NOT NULL,
    abandoned   integer     NOT NULL,
    error       text
);
-- Newest first for the listing, oldest first for pruning; no claim or booking ever touches it.
CREATE INDEX oncely_sweeps_finished ON oncely_sweeps (finished_at, id);
