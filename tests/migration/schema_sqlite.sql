-- index oncely_actions_at
CREATE INDEX oncely_actions_at ON oncely_actions (tenant, at, id);

-- index oncely_actions_schedule
CREATE INDEX oncely_actions_schedule ON oncely_actions (tenant, key, at, id);

-- index oncely_occurrences_claimable
CREATE INDEX oncely_occurrences_claimable ON oncely_occurrences (run_after, id)
    WHERE status IN ('pending', 'retrying');

-- index oncely_occurrences_history
CREATE INDEX oncely_occurrences_history ON oncely_occurrences (tenant, scheduled_for);

-- index oncely_occurrences_in_progress
CREATE INDEX oncely_occurrences_in_progress ON oncely_occurrences (schedule_id)
    WHERE status = 'pending' OR status = 'running' OR status = 'retrying';

-- index oncely_occurrences_leased
CREATE INDEX oncely_occurrences_leased ON oncely_occurrences (lease_expires_at)
    WHERE status = 'running';

-- index oncely_occurrences_prunable
CREATE INDEX oncely_occurrences_prunable ON oncely_occurrences (scheduled_for)
    WHERE status = 'succeeded' OR status = 'failed' OR status = 'skipped' OR status = 'abandoned'
        OR status = 'invalid';

-- index oncely_occurrences_recent
CREATE INDEX oncely_occurrences_recent ON oncely_occurrences (scheduled_for, id);

-- index oncely_schedules_due
CREATE INDEX oncely_schedules_due ON oncely_schedules (next_run_at)
    WHERE status = 'active' AND paused = 0 AND next_run_at IS NOT NULL;

-- index oncely_schedules_keyless_done
CREATE INDEX oncely_schedules_keyless_done ON oncely_schedules (updated_at)
    WHERE keyless AND status IN ('ended', 'removed');

-- index oncely_schedules_pause_ends
CREATE INDEX oncely_schedules_pause_ends ON oncely_schedules (paused_until)
    WHERE paused_until IS NOT NULL;

-- index oncely_schedules_stopped
CREATE INDEX oncely_schedules_stopped ON oncely_schedules (job)
    WHERE paused = 1 OR status = 'invalid';

-- index oncely_sweeps_finished
CREATE INDEX oncely_sweeps_finished ON oncely_sweeps (finished_at, id);

-- index oncely_workers_heartbeat
CREATE INDEX oncely_workers_heartbeat ON oncely_workers (heartbeat_at);

-- table oncely_actions
CREATE TABLE oncely_actions (
    id     INTEGER PRIMARY KEY,
    at     integer NOT NULL,
    tenant text    NOT NULL DEFAULT '',
    key    text    NOT NULL,
    action text    NOT NULL,
    actor  text    NOT NULL,
    reason text    NOT NULL DEFAULT '',
    detail text
) STRICT;

-- table oncely_attempts
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

-- table oncely_code_versions
CREATE TABLE oncely_code_versions (
    fingerprint   text    PRIMARY KEY,
    first_seen_at integer NOT NULL,
    last_seen_at  integer NOT NULL,
    applied_at    integer
) STRICT;

-- table oncely_fences
CREATE TABLE oncely_fences (
    id    integer PRIMARY KEY CHECK (id = 1),
    value integer NOT NULL
) STRICT;

-- table oncely_horizons
CREATE TABLE oncely_horizons (
    name   text    PRIMARY KEY,
    before integer NOT NULL
) STRICT;

-- table oncely_lease_tokens
CREATE TABLE oncely_lease_tokens (
    id    integer PRIMARY KEY CHECK (id = 1),
    value integer NOT NULL
) STRICT;

-- table oncely_leases
CREATE TABLE oncely_leases (
    name        text        PRIMARY KEY,
    owner       text        NOT NULL,
    expires_at  integer     NOT NULL,
    token       integer     NOT NULL) STRICT;

-- table oncely_migrations
CREATE TABLE oncely_migrations (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at integer NOT NULL
) STRICT;

-- table oncely_occurrences
CREATE TABLE oncely_occurrences (
    id               INTEGER PRIMARY KEY,
    schedule_id      integer     NOT NULL REFERENCES oncely_schedules (id),
    tenant           text        NOT NULL DEFAULT '',
    scheduled_for    integer     NOT NULL,
    local_wall       text,
    fold             integer     NOT NULL DEFAULT 0,
    dst_note         text,
    ordinal          integer,
    origin           text        NOT NULL DEFAULT 'schedule'
                                 CHECK (origin IN ('schedule', 'trigger', 'backfill', 'defer')),
    status           text        NOT NULL
                                 CHECK (status IN ('pending', 'running', 'succeeded', 'retrying',
                                                   'failed', 'skipped', 'abandoned', 'invalid')),
    reason           text,
    attempts         integer     NOT NULL DEFAULT 0,
    run_after        integer     NOT NULL,
    lease_owner      text,
    lease_expires_at integer,
    fence            integer,
    started_at       integer,
    finished_at      integer,
    worker           text,
    error            text,
    created_at       integer     NOT NULL,
    -- Exactly once is this constraint, not a code path (DESIGN lesson 1).
    UNIQUE (schedule_id, scheduled_for)
) STRICT;

-- table oncely_schedules
CREATE TABLE oncely_schedules (
    id                   INTEGER PRIMARY KEY,
    tenant               text        NOT NULL DEFAULT '',
    key                  text        NOT NULL,
    job                  text        NOT NULL,
    origin               text        NOT NULL CHECK (origin IN ('code', 'api')),
    trigger_kind         text        NOT NULL CHECK (trigger_kind IN ('cron', 'every', 'rrule', 'at')),
    trigger_spec         text        NOT NULL,
    payload              text        NOT NULL DEFAULT 'null',
    paused               integer     NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    status               text        NOT NULL DEFAULT 'active'
                                     CHECK (status IN ('active', 'ended', 'invalid', 'removed')),
    status_reason        text,
    next_run_at          integer,
    consecutive_failures integer     NOT NULL DEFAULT 0,
    created_at           integer     NOT NULL,
    updated_at           integer     NOT NULL, keyless integer NOT NULL DEFAULT 0, paused_until integer,
    UNIQUE (tenant, key)
) STRICT;

-- table oncely_sweeps
CREATE TABLE oncely_sweeps (
    id          INTEGER PRIMARY KEY,
    worker      text    NOT NULL,
    started_at  integer NOT NULL,
    finished_at integer NOT NULL,
    pruned      integer NOT NULL,
    reclaimed   integer NOT NULL,
    abandoned   integer NOT NULL,
    error       text
) STRICT;

-- table oncely_workers
CREATE TABLE oncely_workers (
    name           text    PRIMARY KEY,
    started_at     integer NOT NULL,
    heartbeat_at   integer NOT NULL,
    oncely_version text    NOT NULL,
    code_version   text    NOT NULL
) STRICT;

