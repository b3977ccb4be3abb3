-- One row per attempt that did not end its occurrence: a failure that was retried, a lost
-- worker's attempt reclaimed or taken over, a failed one retried by hand. The occurrence row
-- keeps the last attempt, so a success writes nothing here. Additive: a new table, created empty;
-- its foreign key takes a brief SHARE ROW EXCLUSIVE lock on oncely_occurrences (no scan, no
-- rewrite). Workers of the previous version run on while it applies and write no rows here; the
-- cascade deletes a pruned occurrence's attempts whoever prunes it, so no version leaves orphans.
CREATE TABLE oncely_attempts (
    occurrence_id bigint      NOT NULL REFERENCES oncely_occurrences (id) ON DELETE CASCADE,
    attempt       integer     NOT NULL,
    outcome       text        NOT NULL CHECK (outcome IN ('failed', 'lost')),
    started_at    timestamptz,
    finished_at   timestamptz,
    worker        text,
    fence         bigint,
    error         text,
    PRIMARY KEY (occurrence_id, attempt)
);
