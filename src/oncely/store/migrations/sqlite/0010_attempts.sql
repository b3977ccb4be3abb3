-- One row per attempt that did not end its occurrence: a failure that was retried, a lost
-- worker's attempt reclaimed or taken over, a failed one retried by hand. The occurrence row
-- keeps the last attempt, so a success writes nothing here. Additive: a new table, created empty.
-- Workers of the previous version run on while it applies and write no rows here; the cascade
-- (foreign keys are on for every connection) deletes a pruned occurrence's attempts whoever
-- prunes it, so no version leaves orphans.
CREATE TABLE oncely_attempts (
    occurrence_id integer NOT NULL REFERENCES oncely_occurrences (id) ON DELETE CASCADE,
    attempt       integer NOT NULL,
    outcome       text    NOT NULL CHECK (outcome IN ('failed', 'lost')),
    started_at    integer,
    finished_at   integer,
    worker        text,
    fence         integer,
    error         text,
    PRIMARY KEY (occurrence_id, attempt)
) STRICT;
