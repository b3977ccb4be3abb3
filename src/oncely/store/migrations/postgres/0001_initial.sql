-- Schedules, their occurrences, and named leases.
-- Times are timestamptz. "No tenant" is '' rather than NULL: NULL is not a value, and a UNIQUE
-- constraint over a NULL tenant would let the same key exist twice.

CREATE TABLE oncely_schedules (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant               text        NOT NULL DEFAULT '',
    key                  text        NOT NULL,
    job                  text        NOT NULL,
    origin               text        NOT NULL CHECK (origin IN ('code', 'api')),
    trigger_kind         text        NOT NULL CHECK (trigger_kind IN ('cron', 'every', 'rrule', 'at')),
    trigger_spec         jsonb       NOT NULL,
    payload              jsonb       NOT NULL DEFAULT 'null',
    paused               boolean     NOT NULL DEFAULT false,
    status               text        NOT NULL DEFAULT 'active'
                                     CHECK (status IN ('active', 'ended', 'invalid', 'removed')),
    status_reason        text,
    next_run_at          timestamptz,
    fence                bigint      NOT NULL DEFAULT 0,
    consecutive_failures integer     NOT NULL DEFAULT 0,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    UNIQUE (tenant, key)
);

-- The wake-up query: the earliest next_run_at of schedules that can fire.
CREATE INDEX oncely_schedules_due ON oncely_schedules (next_run_at)
    WHERE status = 'active' AND NOT paused AND next_run_at IS NOT NULL;

CREATE TABLE oncely_occurrences (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id      bigint      NOT NULL REFERENCES oncely_schedules (id),
    tenant           text        NOT NULL DEFAULT '',
    scheduled_for    timestamptz NOT NULL,
    local_wall       text,
    fold             smallint    NOT NULL DEFAULT 0,
    dst_note         text,
    ordinal          integer,
    origin           text        NOT NULL DEFAULT 'schedule'
                                 CHECK (origin IN ('schedule', 'trigger', 'backfill', 'defer')),
    status           text        NOT NULL
                                 CHECK (status IN ('pending', 'running', 'succeeded', 'retrying',
                                                   'failed', 'skipped', 'abandoned', 'invalid')),
    reason           text,
    attempts         integer     NOT NULL DEFAULT 0,
    run_after        timestamptz NOT NULL,
    lease_owner      text,
    lease_expires_at timestamptz,
    fence            bigint,
    started_at       timestamptz,
    finished_at      timestamptz,
    worker           text,
    error            text,
    created_at       timestamptz NOT NULL,
    -- Exactly once is this constraint, not a code path (DESIGN lesson 1).
    UNIQUE (schedule_id, scheduled_for)
);

-- Claimable work: pending or retrying, by when it may run.
CREATE INDEX oncely_occurrences_claimable ON oncely_occurrences (run_after)
    WHERE status IN ('pending', 'retrying');
-- Crashed workers' claims: running, by when their lease expires.
CREATE INDEX oncely_occurrences_leased ON oncely_occurrences (lease_expires_at)
    WHERE status = 'running';
CREATE INDEX oncely_occurrences_history ON oncely_occurrences (tenant, scheduled_for);

CREATE TABLE oncely_leases (
    name        text        PRIMARY KEY,
    owner       text        NOT NULL,
    expires_at  timestamptz NOT NULL,
    fence       bigint      NOT NULL,
    acquired_at timestamptz NOT NULL
);
