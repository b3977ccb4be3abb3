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

-- name: advance_schedule
-- Compare-and-swap on next_run_at: of two processes materialising the same schedule, one moves it
-- on and the other finds nothing to do. The NULL arm is explicit: IS is SQLite's null-safe "=".
UPDATE oncely_schedules
SET next_run_at = :next_run_at,
    status = CASE WHEN :next_run_at IS NULL THEN 'ended' ELSE status END,
    updated_at = :now
WHERE tenant = :tenant AND key = :key AND status = 'active' AND next_run_at IS :expected
RETURNING id;

-- name: insert_occurrence
-- Exactly once is the UNIQUE (schedule_id, scheduled_for) constraint: a second insert of the same
-- occurrence, by any process, does nothing.
INSERT INTO oncely_occurrences
    (schedule_id, tenant, scheduled_for, local_wall, fold, dst_note, ordinal, origin, status,
     reason, run_after, created_at)
VALUES
    (:schedule_id, :tenant, :scheduled_for, :local_wall, :fold, :dst_note, :ordinal, :origin,
     :status, :reason, :run_after, :now)
ON CONFLICT (schedule_id, scheduled_for) DO NOTHING;

-- name: next_schedule_due
SELECT min(next_run_at) FROM oncely_schedules
WHERE status = 'active' AND paused = 0 AND next_run_at IS NOT NULL;

-- name: select_history
-- Each filter's NULL arm is spelled out: a NULL filter means "any", never "matches NULL".
SELECT s.key, o.tenant, o.scheduled_for, o.status, o.attempts, o.started_at, o.finished_at,
    o.worker, o.error, o.reason, o.local_wall, o.fold, o.dst_note, o.ordinal, o.origin
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.tenant = :tenant
  AND (:key IS NULL OR s.key = :key)
  AND (:since IS NULL OR o.scheduled_for >= :since)
  AND (:until IS NULL OR o.scheduled_for < :until)
  AND (:status IS NULL OR o.status = :status)
ORDER BY o.scheduled_for DESC, o.id DESC
LIMIT :limit;
