-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS oncely_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL
);

-- name: lock_migrations
-- Two processes starting together both migrate; this transaction-scoped lock lines them up.
SELECT pg_advisory_xact_lock(hashtext('oncely_migrations'));

-- name: applied_versions
SELECT version FROM oncely_migrations ORDER BY version;

-- name: record_migration
INSERT INTO oncely_migrations (version, name, applied_at) VALUES (%(version)s, %(name)s, %(applied_at)s);

-- name: migrations_table_exists
SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'oncely_migrations';

-- name: upsert_schedule
-- One row per (tenant, key). A second save of the same key replaces what it runs and when, and
-- keeps the row (its id, paused flag and history).
INSERT INTO oncely_schedules
    (tenant, key, job, origin, trigger_kind, trigger_spec, payload, status, next_run_at,
     created_at, updated_at)
VALUES
    (%(tenant)s, %(key)s, %(job)s, %(origin)s, %(trigger_kind)s, %(trigger_spec)s::jsonb, %(payload)s::jsonb, %(status)s, %(next_run_at)s,
     %(now)s, %(now)s)
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
WHERE tenant = %(tenant)s AND key = %(key)s AND status <> 'removed';

-- name: select_schedules_of_tenant
SELECT id, tenant, key, job, origin, trigger_spec, payload, paused, status, status_reason,
    next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE tenant = %(tenant)s AND status <> 'removed'
ORDER BY key;

-- name: select_schedules_of_all_tenants
SELECT id, tenant, key, job, origin, trigger_spec, payload, paused, status, status_reason,
    next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE status <> 'removed'
ORDER BY tenant, key;

-- name: set_paused
UPDATE oncely_schedules SET paused = %(paused)s, updated_at = %(now)s
WHERE tenant = %(tenant)s AND key = %(key)s AND status <> 'removed'
RETURNING id, tenant, key, job, origin, trigger_spec, payload, paused, status, status_reason,
    next_run_at, created_at, updated_at;

-- name: remove_schedule
-- A removed schedule stops firing and stays, with its occurrences, as history.
UPDATE oncely_schedules SET status = 'removed', next_run_at = NULL, updated_at = %(now)s
WHERE tenant = %(tenant)s AND key = %(key)s AND status <> 'removed'
RETURNING id, tenant, key, job, origin, trigger_spec, payload, paused, status, status_reason,
    next_run_at, created_at, updated_at;
