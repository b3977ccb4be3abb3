-- One row per set of code-declared schedules ever started (a code version, by fingerprint), so
-- that reconciliation can tell an older version from a newer one: the first version seen last
-- is the newest, and an older one started mid-deploy does not put its triggers back while a
-- newer one is live.
CREATE TABLE oncely_code_versions (
    fingerprint   text        PRIMARY KEY,
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    applied_at    timestamptz
);
