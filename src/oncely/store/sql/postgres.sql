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

-- name: advance_schedule
-- Compare-and-swap on next_run_at: of two processes materialising the same schedule, one moves it
-- on and the other finds nothing to do. The NULL arm is explicit: IS NOT DISTINCT FROM.
UPDATE oncely_schedules
SET next_run_at = %(next_run_at)s::timestamptz,
    status = CASE WHEN %(next_run_at)s::timestamptz IS NULL THEN 'ended' ELSE status END,
    updated_at = %(now)s
WHERE tenant = %(tenant)s AND key = %(key)s AND status = 'active'
  AND next_run_at IS NOT DISTINCT FROM %(expected)s::timestamptz
RETURNING id;

-- name: insert_occurrence
-- Exactly once is the UNIQUE (schedule_id, scheduled_for) constraint: a second insert of the same
-- occurrence, by any process, does nothing.
INSERT INTO oncely_occurrences
    (schedule_id, tenant, scheduled_for, local_wall, fold, dst_note, ordinal, origin, status,
     reason, run_after, created_at)
VALUES
    (%(schedule_id)s, %(tenant)s, %(scheduled_for)s, %(local_wall)s, %(fold)s, %(dst_note)s,
     %(ordinal)s, %(origin)s, %(status)s, %(reason)s, %(run_after)s, %(now)s)
ON CONFLICT (schedule_id, scheduled_for) DO NOTHING;

-- name: next_schedule_due
SELECT min(next_run_at) FROM oncely_schedules
WHERE status = 'active' AND NOT paused AND next_run_at IS NOT NULL;

-- name: select_history
-- Each filter's NULL arm is spelled out: a NULL filter means "any", never "matches NULL".
SELECT s.key, o.tenant, o.scheduled_for, o.status, o.attempts, o.started_at, o.finished_at,
    o.worker, o.error, o.reason, o.local_wall, o.fold, o.dst_note, o.ordinal, o.origin
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.tenant = %(tenant)s
  AND (%(key)s::text IS NULL OR s.key = %(key)s)
  AND (%(since)s::timestamptz IS NULL OR o.scheduled_for >= %(since)s)
  AND (%(until)s::timestamptz IS NULL OR o.scheduled_for < %(until)s)
  AND (%(status)s::text IS NULL OR o.status = %(status)s)
ORDER BY o.scheduled_for DESC, o.id DESC
LIMIT %(limit)s;
