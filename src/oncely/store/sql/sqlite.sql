-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS oncely_migrations (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at integer NOT NULL
) STRICT;

-- name: applied_versions
SELECT version FROM oncely_migrations ORDER BY version;

-- name: record_migration
INSERT INTO oncely_migrations (version, name, applied_at) VALUES (:version, :name, :applied_at);

-- name: lock_migrations
-- Two processes starting together both migrate; taking the write lock first lines them up.
BEGIN IMMEDIATE;

-- name: migrations_table_exists
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'oncely_migrations';

-- name: upsert_schedule
-- One row per (tenant, key). A second save of the same key replaces what it runs and when, and
-- keeps the row (its id, paused flag and history).
INSERT INTO oncely_schedules
    (tenant, key, job, origin, trigger_kind, trigger_spec, payload, status, next_run_at,
     created_at, updated_at)
VALUES
    (:tenant, :key, :job, :origin, :trigger_kind, :trigger_spec, :payload, :status, :next_run_at,
     :now, :now)
ON CONFLICT (tenant, key) DO UPDATE SET
    job = excluded.job,
    origin = excluded.origin,
    trigger_kind = excluded.trigger_kind,
    trigger_spec = excluded.trigger_spec,
    payload = excluded.payload,
    status = excluded.status,
    status_reason = NULL,
    next_run_at = excluded.next_run_at,
    updated_at = excluded.updated_at
RETURNING id, tenant, key, job, origin, trigger_spec, payload, paused, status, status_reason,
    next_run_at, created_at, updated_at;

-- name: select_schedule
SELECT id, tenant, key, job, origin, trigger_spec, payload, paused, status, status_reason,
    next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE tenant = :tenant AND key = :key AND status <> 'removed';

-- name: select_schedules_of_tenant
SELECT id, tenant, key, job, origin, trigger_spec, payload, paused, status, status_reason,
    next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE tenant = :tenant AND status <> 'removed'
ORDER BY key;

-- name: select_schedules_of_all_tenants
SELECT id, tenant, key, job, origin, trigger_spec, payload, paused, status, status_reason,
    next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE status <> 'removed'
ORDER BY tenant, key;

-- name: set_paused
UPDATE oncely_schedules SET paused = :paused, updated_at = :now
WHERE tenant = :tenant AND key = :key AND status <> 'removed'
RETURNING id, tenant, key, job, origin, trigger_spec, payload, paused, status, status_reason,
    next_run_at, created_at, updated_at;

-- name: remove_schedule
-- A removed schedule stops firing and stays, with its occurrences, as history.
UPDATE oncely_schedules SET status = 'removed', next_run_at = NULL, updated_at = :now
WHERE tenant = :tenant AND key = :key AND status <> 'removed'
RETURNING id, tenant, key, job, origin, trigger_spec, payload, paused, status, status_reason,
    next_run_at, created_at, updated_at;
