-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS oncely_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL
);

-- name: lock_migrations
-- Two processes starting together both migrate; this lock lines them up. Held by the session (its
-- own connection, closed after): a migration outside a transaction commits statement by statement.
SELECT pg_advisory_lock(hashtext('oncely_migrations'));

-- name: applied_versions
SELECT version FROM oncely_migrations ORDER BY version;

-- name: record_migration
INSERT INTO oncely_migrations (version, name, applied_at) VALUES (%(version)s, %(name)s, %(applied_at)s);

-- name: migrations_table_exists
SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'oncely_migrations';

-- name: upsert_schedules
-- One row per (tenant, key). A second save of the same key replaces what it runs and when, and
-- keeps the row (its id, paused flag and history). The batch is one JSON parameter: a row per
-- item, however many items, where a parameter per value met PostgreSQL's limit of 65,535.
-- The occurrences of the batch (a one-off's single run), keyed by (tenant, key), are recorded
-- in the same statement, as insert_occurrence records one, with the ids the upsert returns
-- (not looked up again in the index, one probe per occurrence).
WITH saved AS (
    INSERT INTO oncely_schedules
        (tenant, key, job, origin, trigger_kind, trigger_spec, payload, status, next_run_at,
         keyless, created_at, updated_at)
    SELECT r.tenant, r.key, r.job, r.origin, r.trigger_kind, r.trigger_spec::jsonb,
        r.payload::jsonb, r.status, r.next_run_at, r.keyless, %(now)s, %(now)s
    FROM json_to_recordset(%(rows)s::json) AS r(tenant text, key text, job text, origin text,
        trigger_kind text, trigger_spec text, payload text, status text,
        next_run_at timestamptz, keyless boolean)
    ON CONFLICT (tenant, key) DO UPDATE SET
        job = excluded.job,
        origin = excluded.origin,
        trigger_kind = excluded.trigger_kind,
        trigger_spec = excluded.trigger_spec,
        payload = excluded.payload,
        status = excluded.status,
        status_reason = NULL,
        next_run_at = excluded.next_run_at,
        keyless = excluded.keyless,
        updated_at = excluded.updated_at
    RETURNING id, tenant, key, paused, status, next_run_at, created_at, updated_at
), planned AS (
    INSERT INTO oncely_occurrences
        (schedule_id, tenant, scheduled_for, local_wall, fold, dst_note, ordinal, origin, status,
         reason, run_after, created_at)
    SELECT s.id, s.tenant, r.scheduled_for, r.local_wall, r.fold, r.dst_note, r.ordinal,
        r.origin, r.status, r.reason, r.scheduled_for, %(now)s
    FROM json_to_recordset(%(occurrences)s::json) AS r(tenant text, key text,
        scheduled_for timestamptz, local_wall text, fold smallint, dst_note text,
        ordinal integer, origin text, status text, reason text)
    JOIN saved s ON s.tenant = r.tenant AND s.key = r.key
    ON CONFLICT (schedule_id, scheduled_for) DO UPDATE SET
        local_wall = excluded.local_wall, fold = excluded.fold, dst_note = excluded.dst_note,
        ordinal = excluded.ordinal, origin = excluded.origin, status = excluded.status,
        reason = excluded.reason, run_after = excluded.run_after,
        created_at = excluded.created_at, finished_at = NULL
    WHERE oncely_occurrences.status = 'skipped'
      AND ((oncely_occurrences.attempts = 0 AND oncely_occurrences.started_at IS NULL
            AND oncely_occurrences.reason LIKE 'superseded:%%')
           OR oncely_occurrences.reason LIKE 'unscheduled:%%')
)
SELECT tenant, key, paused, status, next_run_at, created_at, updated_at FROM saved;

-- name: insert_schedules
-- upsert_schedules for schedules whose keys are stored nowhere: a keyless one-off's new random
-- key, or a key save_schedules tries as new before it looks for a stored row to lock (a keyed
-- defer of a new key was two round trips, the first only to find nothing). A stored key fails
-- the statement on the unique constraint, and nothing of it is written.
WITH saved AS (
    INSERT INTO oncely_schedules
        (tenant, key, job, origin, trigger_kind, trigger_spec, payload, status, next_run_at,
         keyless, created_at, updated_at)
    SELECT r.tenant, r.key, r.job, r.origin, r.trigger_kind, r.trigger_spec::jsonb,
        r.payload::jsonb, r.status, r.next_run_at, r.keyless, %(now)s, %(now)s
    FROM json_to_recordset(%(rows)s::json) AS r(tenant text, key text, job text, origin text,
        trigger_kind text, trigger_spec text, payload text, status text,
        next_run_at timestamptz, keyless boolean)
    RETURNING id, tenant, key, paused, status, next_run_at, created_at, updated_at
), planned AS (
    INSERT INTO oncely_occurrences
        (schedule_id, tenant, scheduled_for, local_wall, fold, dst_note, ordinal, origin, status,
         reason, run_after, created_at)
    SELECT s.id, s.tenant, r.scheduled_for, r.local_wall, r.fold, r.dst_note, r.ordinal,
        r.origin, r.status, r.reason, r.scheduled_for, %(now)s
    FROM json_to_recordset(%(occurrences)s::json) AS r(tenant text, key text,
        scheduled_for timestamptz, local_wall text, fold smallint, dst_note text,
        ordinal integer, origin text, status text, reason text)
    JOIN saved s ON s.tenant = r.tenant AND s.key = r.key
)
SELECT tenant, key, paused, status, next_run_at, created_at, updated_at FROM saved;

-- name: lock_schedules_to_save
-- The schedules of a save batch that exist, in any status, locked until the transaction ends, in
-- (tenant, key) order: two batches sharing keys never deadlock. The history horizon comes in the
-- same round trip (a one-off moved before it is refused); NULL when history was never pruned.
SELECT s.tenant, s.key, s.id, s.job, s.origin, s.trigger_spec, s.status, s.next_run_at,
    (SELECT h.before FROM oncely_horizons h WHERE h.name = 'history') AS horizon
FROM oncely_schedules s
WHERE (s.tenant, s.key) IN (SELECT * FROM unnest(%(tenants)s::text[], %(keys)s::text[]))
ORDER BY s.tenant, s.key
FOR UPDATE OF s;

-- name: select_schedule
SELECT id, tenant, key, job, origin, trigger_spec, payload, paused, paused_until, status,
    status_reason, next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE tenant = %(tenant)s AND key = %(key)s AND status <> 'removed';

-- name: select_schedules
-- One page of the schedules, by (tenant, key), after (after_tenant, after_key). Each filter's
-- NULL arm is spelled out: a NULL filter means "any". Listing a million per-user reminders at
-- once was the only way before. Unscheduled ones are listed only when asked for by status.
SELECT id, tenant, key, job, origin, trigger_spec, payload, paused, paused_until, status,
    status_reason, next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE (status <> 'removed' OR %(status)s::text = 'removed')
  AND (%(all_tenants)s OR tenant = %(tenant)s)
  AND (%(job)s::text IS NULL OR job = %(job)s)
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(prefix)s::text IS NULL OR starts_with(key, %(prefix)s))
  AND (%(after_key)s::text IS NULL OR (tenant, key) > (%(after_tenant)s::text, %(after_key)s::text))
ORDER BY tenant, key
LIMIT %(limit)s;

-- name: set_paused
UPDATE oncely_schedules SET paused = %(paused)s, paused_until = %(until)s, updated_at = %(now)s
WHERE tenant = %(tenant)s AND key = %(key)s AND status <> 'removed'
RETURNING id, tenant, key, job, origin, trigger_spec, payload, paused, paused_until, status,
    status_reason, next_run_at, created_at, updated_at;

-- name: lock_ended_pauses
-- Schedules whose pause ended at or before now, locked to be resumed (end_pause). One another
-- worker is resuming right now is skipped, not waited for.
SELECT id, tenant, key, paused_until FROM oncely_schedules
WHERE paused_until IS NOT NULL AND paused_until <= %(now)s AND paused AND status <> 'removed'
ORDER BY paused_until
LIMIT %(limit)s
FOR UPDATE OF oncely_schedules SKIP LOCKED;

-- name: end_pause
UPDATE oncely_schedules SET paused = false, paused_until = NULL, updated_at = %(now)s
WHERE id = %(id)s;

-- name: skip_waiting
-- What a removed schedule had waiting (to run, or to retry) will not run: it is recorded so.
UPDATE oncely_occurrences SET status = 'skipped', reason = %(reason)s
WHERE status IN ('pending', 'retrying')
  AND schedule_id = (SELECT id FROM oncely_schedules
                     WHERE tenant = %(tenant)s AND key = %(key)s AND status <> 'removed');

-- name: remove_schedule
-- A removed schedule stops firing and stays, with its occurrences, as history.
UPDATE oncely_schedules SET status = 'removed', next_run_at = NULL, updated_at = %(now)s
WHERE tenant = %(tenant)s AND key = %(key)s AND status <> 'removed'
RETURNING id, tenant, key, job, origin, trigger_spec, payload, paused, paused_until, status,
    status_reason, next_run_at, created_at, updated_at;

-- name: advance_schedule
-- Compare-and-swap on next_run_at: of two processes materialising the same schedule, one moves it
-- on and the other finds nothing to do. The NULL arm is explicit: IS NOT DISTINCT FROM.
UPDATE oncely_schedules
SET next_run_at = %(next_run_at)s::timestamptz,
    status = CASE WHEN %(next_run_at)s::timestamptz IS NULL THEN 'ended' ELSE status END,
    updated_at = %(now)s
WHERE tenant = %(tenant)s AND key = %(key)s AND status = 'active'
  AND next_run_at IS NOT DISTINCT FROM %(expected)s::timestamptz
RETURNING id, job;

-- name: insert_occurrence
-- Exactly once is the UNIQUE (schedule_id, scheduled_for) constraint: a second insert of the same
-- occurrence, by any process, does nothing. Except over a row an edit or an unschedule skipped
-- before it ever started: planned again (a timer moved away and back, a trigger changed a second
-- before its run), it is planned anew. Left as it was, it held the slot and the new plan was lost.
-- An unschedule also skips an attempt waiting to retry, which never succeeded either: a timer
-- cancelled then, and deferred again at its time, read "unscheduled" for ever and never ran.
INSERT INTO oncely_occurrences
    (schedule_id, tenant, scheduled_for, local_wall, fold, dst_note, ordinal, origin, status,
     reason, run_after, created_at)
VALUES
    (%(schedule_id)s, %(tenant)s, %(scheduled_for)s, %(local_wall)s, %(fold)s, %(dst_note)s,
     %(ordinal)s, %(origin)s, %(status)s, %(reason)s, %(run_after)s, %(now)s)
ON CONFLICT (schedule_id, scheduled_for) DO UPDATE SET
    local_wall = excluded.local_wall, fold = excluded.fold, dst_note = excluded.dst_note,
    ordinal = excluded.ordinal, origin = excluded.origin, status = excluded.status,
    reason = excluded.reason, run_after = excluded.run_after, created_at = excluded.created_at,
    finished_at = NULL
WHERE oncely_occurrences.status = 'skipped'
  AND ((oncely_occurrences.attempts = 0 AND oncely_occurrences.started_at IS NULL
        AND oncely_occurrences.reason LIKE 'superseded:%%')
       OR oncely_occurrences.reason LIKE 'unscheduled:%%')
-- What this statement wrote (nothing when the row was there already): a worker counts the
-- skipped occurrences it recorded, and two workers writing the same one must not both count it.
RETURNING status, reason;

-- name: next_schedule_due
-- The earliest next run of an active, unpaused schedule, or end of a pause (a wake-up time too),
-- in one round trip; each min() reads its own partial index. jobs NULL: any job; after NULL: any
-- time. min() over the two skips the NULL of an empty one.
SELECT min(due) AS due FROM (
    SELECT min(next_run_at) AS due FROM oncely_schedules
    WHERE status = 'active' AND NOT paused AND next_run_at IS NOT NULL
      AND (%(jobs)s::text[] IS NULL OR job = ANY(%(jobs)s::text[]))
      AND (%(after)s::timestamptz IS NULL OR next_run_at > %(after)s::timestamptz)
    UNION ALL
    SELECT min(paused_until) FROM oncely_schedules
    WHERE paused_until IS NOT NULL AND paused AND status <> 'removed'
      AND (%(jobs)s::text[] IS NULL OR job = ANY(%(jobs)s::text[]))
      AND (%(after)s::timestamptz IS NULL OR paused_until > %(after)s::timestamptz)
) AS soonest;

-- name: next_occurrence_due
-- The earliest time a waiting or retrying occurrence may be claimed (the other half of the
-- wake-up), with the claim's own admission: an occurrence of a paused schedule, or of a job the
-- caller does not run, woke a worker that could not claim it, again and again. ORDER BY ...
-- LIMIT 1 rather than min(): min() over the join read every waiting row.
SELECT o.run_after AS due
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status IN ('pending', 'retrying') AND NOT s.paused AND s.status <> 'removed'
  AND (%(jobs)s::text[] IS NULL OR s.job = ANY(%(jobs)s::text[]))
  AND (%(after)s::timestamptz IS NULL OR o.run_after > %(after)s::timestamptz)
ORDER BY o.run_after, o.id
LIMIT 1;

-- name: select_history
-- Each filter's NULL arm is spelled out: a NULL filter means "any", never "matches NULL". Newest
-- first within each tenant, by oncely_occurrences_history (tenant, scheduled_for), and merged:
-- the tenants are found by skipping through that index (one probe per tenant), and each gives at
-- most LIMIT rows. An index by time alone would serve every tenant at once, and cost every claim
-- and every booking one more index entry (2 workers drained a burst 4 to 13 per cent slower
-- with one: migration 13).
WITH RECURSIVE tenants (tenant) AS (
    (SELECT tenant FROM oncely_occurrences
     WHERE %(all_tenants)s OR tenant = %(tenant)s
     ORDER BY tenant LIMIT 1)
    UNION ALL
    SELECT (SELECT o.tenant FROM oncely_occurrences o
            WHERE %(all_tenants)s AND o.tenant > t.tenant
            ORDER BY o.tenant LIMIT 1)
    FROM tenants t WHERE t.tenant IS NOT NULL
)
SELECT h.* FROM tenants t CROSS JOIN LATERAL (
    SELECT s.key, o.tenant, o.scheduled_for, o.status, o.attempts, o.started_at, o.finished_at,
        o.worker, o.error, o.reason, o.local_wall, o.fold, o.dst_note, o.ordinal, o.origin,
        o.run_after, o.lease_expires_at, o.fence, o.id
    FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
    WHERE o.tenant = t.tenant
      AND (%(since)s::timestamptz IS NULL OR o.scheduled_for >= %(since)s)
      AND (%(until)s::timestamptz IS NULL OR o.scheduled_for < %(until)s)
      AND (%(status)s::text IS NULL OR o.status = %(status)s)
    ORDER BY o.scheduled_for DESC, o.id DESC
    LIMIT %(limit)s
) h
ORDER BY h.scheduled_for DESC, h.id DESC
LIMIT %(limit)s;

-- name: select_history_of_key
-- One key's history, as select_history: its tenants found by skipping through the schedules'
-- (tenant, key) index (one probe each), the key's schedule in each, and its occurrences newest
-- first through the (schedule_id, scheduled_for) index. Walking history newest first until it
-- had the key's rows took 26 ms at 10 M occurrences; reading the schedules for the key (no
-- index has it alone), 6.5 ms at 100,000 schedules.
WITH RECURSIVE tenants (tenant) AS (
    SELECT CASE WHEN %(all_tenants)s THEN (SELECT min(tenant) FROM oncely_schedules)
                ELSE %(tenant)s END
    UNION ALL
    SELECT (SELECT min(s.tenant) FROM oncely_schedules s WHERE s.tenant > t.tenant)
    FROM tenants t WHERE t.tenant IS NOT NULL AND %(all_tenants)s
)
SELECT h.* FROM tenants t
JOIN oncely_schedules s ON s.tenant = t.tenant AND s.key = %(key)s
CROSS JOIN LATERAL (
    SELECT s.key, o.tenant, o.scheduled_for, o.status, o.attempts, o.started_at, o.finished_at,
        o.worker, o.error, o.reason, o.local_wall, o.fold, o.dst_note, o.ordinal, o.origin,
        o.run_after, o.lease_expires_at, o.fence, o.id
    FROM oncely_occurrences o
    WHERE o.schedule_id = s.id
      AND (%(since)s::timestamptz IS NULL OR o.scheduled_for >= %(since)s)
      AND (%(until)s::timestamptz IS NULL OR o.scheduled_for < %(until)s)
      AND (%(status)s::text IS NULL OR o.status = %(status)s)
    ORDER BY o.scheduled_for DESC  -- unique in a schedule: newest first, day by day
    LIMIT %(limit)s
) h
ORDER BY h.scheduled_for DESC, h.id DESC
LIMIT %(limit)s;

-- name: lock_schedule
-- The schedule (tenant, key) in any status, locked until the transaction ends.
SELECT id, job, origin, trigger_spec, status, next_run_at FROM oncely_schedules
WHERE tenant = %(tenant)s AND key = %(key)s
FOR UPDATE;

-- name: supersede_pending
-- A changed trigger replaces the future: what the old one planned and nobody started is skipped.
UPDATE oncely_occurrences SET status = 'skipped', reason = %(reason)s
WHERE schedule_id = ANY(%(ids)s::bigint[]) AND status = 'pending'
  AND origin IN ('schedule', 'defer');

-- name: insert_saved_occurrences
-- Not used on PostgreSQL, where upsert_schedules records a batch's occurrences in the same
-- statement; it exists so that both dialects keep one set of query names.
SELECT 1;

-- name: identity
-- Which database a connection is on, for a caller's connection to be compared with the store's
-- own: the server is told apart by its start time, needing no privilege to read.
SELECT current_database() AS db, pg_postmaster_start_time() AS started,
    inet_server_port() AS port, current_schema() AS schema;

-- name: commit
-- Sent in the pipeline of a save's last statements: the save is one round trip, not two.
COMMIT;

-- name: lock_schedules_to_materialise
-- The schedules of a materialise batch this transaction gets to itself. One another worker is
-- materialising right now is skipped, not waited for: it will have moved the next run on, and
-- waiting only to find that out held two workers in lock step. One whose next run another
-- worker moved on meanwhile is not locked either: held only to find that out, its lock made
-- every claimer of that moment skip the occurrence just written (SKIP LOCKED in lock_schedules),
-- and four instances each ticking once left an hourly occurrence unrun.
SELECT tenant, key FROM oncely_schedules
WHERE (tenant, key, next_run_at) IN (
    SELECT * FROM unnest(%(tenants)s::text[], %(keys)s::text[], %(expected)s::timestamptz[])
)
FOR UPDATE SKIP LOCKED;

-- name: due_schedules
-- Uses the partial index oncely_schedules_due; next_run_at's NULL arm is excluded explicitly.
-- The store writes the limit in as a number (see PostgresStore.due_schedules).
-- The payload is not read: materialising never needs it, and fifty 1 MB payloads read again with
-- every batch made a worker seconds late.
SELECT id, tenant, key, job, origin, trigger_spec, 'null'::jsonb AS payload, paused, status,
    status_reason, next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE status = 'active' AND NOT paused AND next_run_at IS NOT NULL
  AND next_run_at > %(after)s AND next_run_at <= %(now)s AND job = ANY(%(jobs)s::text[])
ORDER BY next_run_at
LIMIT %(limit)s;

-- name: supersede_stale
-- Pending occurrences of each schedule's own series older than the newest one planned now, never
-- started, while none of that schedule runs or waits to retry: superseded by it under misfire
-- 'skip' and 'latest'. Left pending, the one written just before every worker stopped ran (or
-- was skipped as too late) instead of the newest. One that waits for a running one (overlap
-- 'buffer_one') is not stale: it runs next.
-- The whole batch in one statement, one row per schedule that had any: run once per schedule,
-- each run set up the update of every day's partition (a millisecond with 8 days), so a worker
-- that materialised 1,000 every-second schedules a little late spent the next second on this,
-- was later still, and skipped most of what came due (a lag benchmark ran a fifth of them).
WITH batch AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(befores)s::timestamptz[], %(reasons)s::text[])
        AS b(schedule_id, before, reason)
), superseded AS (
    UPDATE oncely_occurrences o
    SET status = 'skipped', reason = b.reason, finished_at = %(now)s
    FROM batch b
    WHERE o.schedule_id = b.schedule_id AND o.status = 'pending' AND o.origin = 'schedule'
      AND o.attempts = 0 AND o.scheduled_for < b.before
      AND NOT EXISTS (SELECT 1 FROM oncely_occurrences r
                      WHERE r.schedule_id = b.schedule_id
                        AND r.status IN ('running', 'retrying'))
    RETURNING o.schedule_id
)
SELECT schedule_id, count(*) AS superseded FROM superseded GROUP BY schedule_id;

-- name: in_progress
-- How many occurrences of each schedule of the batch wait (pending) and how many run or wait to
-- retry: one statement for the batch, as supersede_stale (and for the same reason).
SELECT b.schedule_id,
       count(*) FILTER (WHERE o.status = 'pending') AS waiting,
       count(*) FILTER (WHERE o.status IN ('running', 'retrying')) AS running
FROM unnest(%(ids)s::bigint[]) AS b(schedule_id)
LEFT JOIN oncely_occurrences o
    ON o.schedule_id = b.schedule_id AND o.status IN ('pending', 'running', 'retrying')
GROUP BY b.schedule_id;

-- name: schedule_id
SELECT id FROM oncely_schedules
WHERE tenant = %(tenant)s AND key = %(key)s AND status <> 'removed';

-- name: rearm_skipped
-- Backfill gives an occurrence that was skipped its run after all, once: a second backfill finds
-- it pending or finished and leaves it.
UPDATE oncely_occurrences
SET status = 'pending', origin = 'backfill', run_after = %(now)s,
    reason = 'backfilled; skipped before: ' || coalesce(reason, 'no reason recorded')
WHERE schedule_id = %(schedule_id)s AND scheduled_for = %(scheduled_for)s AND status = 'skipped';

-- name: mark_invalid
-- The active ones of these (tenant, key, reason) stopped, all in one statement: one round trip per
-- schedule made 2,500 bad rules hold up the schedules due with them for seconds. Locked in
-- (tenant, key) order, so two workers meeting the same rules never deadlock; one another worker
-- stopped first is no longer active when its lock is granted, and is left out.
WITH wanted AS (
    SELECT * FROM unnest(%(tenants)s::text[], %(keys)s::text[], %(reasons)s::text[])
        AS w(tenant, key, reason)
), locked AS (
    SELECT s.id, s.next_run_at, w.reason
    FROM oncely_schedules s JOIN wanted w ON s.tenant = w.tenant AND s.key = w.key
    WHERE s.status = 'active'
    ORDER BY s.tenant, s.key
    FOR UPDATE OF s
)
UPDATE oncely_schedules s
SET status = 'invalid', status_reason = locked.reason, next_run_at = NULL, updated_at = %(now)s
FROM locked
WHERE s.id = locked.id
RETURNING s.id, s.tenant, s.key, locked.next_run_at AS stopped_at, locked.reason;

-- name: claim_expired
-- Occurrences whose worker was lost: running, lease expired, of jobs that may run again
-- (at_least_once and transactional). A running row with no lease at all (none is written so) is
-- left to the sweep's ``reclaimable``: the OR of it here made every claim read the index entry of
-- every running row, expired or not (1,000 of them per claim with 1,000 claims held).
-- SKIP LOCKED: two claimers never wait on, or take, the same row.
SELECT o.id, o.schedule_id, s.job, o.scheduled_for
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status = 'running' AND o.lease_expires_at <= %(now)s
  AND s.job = ANY(%(jobs)s::text[]) AND NOT s.paused AND s.status <> 'removed'
ORDER BY o.lease_expires_at
LIMIT %(limit)s
FOR UPDATE OF o SKIP LOCKED;

-- name: claim_ready
-- Occurrences of serial jobs (overlap other than "allow") waiting to run or to retry whose time
-- comes by due_by (now, or the worker's next wake-up just ahead), oldest first. The caller then
-- locks their schedules and admits one per schedule. ``ahead``: pending from its schedule and
-- written before it came due, so overlap='skip' is judged now (see skip_overlapped).
-- ``exclude``: schedules an earlier round of the same claim already saw. Without it a backlog
-- of one schedule filled every claim's limit with rows that could not run while its head ran,
-- and every other schedule's due occurrence waited behind it.
SELECT o.id, o.schedule_id, s.job, o.scheduled_for, o.run_after,
    (o.origin = 'schedule' AND o.status = 'pending' AND o.created_at < o.run_after) AS ahead
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status IN ('pending', 'retrying') AND o.run_after <= %(due_by)s
  AND s.job = ANY(%(jobs)s::text[]) AND NOT s.paused AND s.status <> 'removed'
  AND o.schedule_id <> ALL(%(exclude)s::bigint[])
ORDER BY o.run_after, o.id
LIMIT %(limit)s
FOR UPDATE OF o SKIP LOCKED;

-- name: claim_free
-- Occurrences of jobs that allow overlap due by due_by, claimed in one statement: picked oldest
-- first (SKIP LOCKED: two claimers never take the same row), started under the lease, returned.
-- A claim taken ahead records its start at run_after, when the worker starts it. The picked ids
-- are one array, updated by primary key: joined to the CTE, once the statistics knew the backlog
-- the planner hashed the whole occurrence table for every claim.
WITH picked AS (
    SELECT o.id, o.scheduled_for
    FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
    WHERE o.status IN ('pending', 'retrying') AND o.run_after <= %(due_by)s
      AND s.job = ANY(%(jobs)s::text[]) AND NOT s.paused AND s.status <> 'removed'
    ORDER BY o.run_after, o.id
    LIMIT %(limit)s
    FOR UPDATE OF o SKIP LOCKED
)
UPDATE oncely_occurrences o
SET status = 'running', attempts = o.attempts + 1, lease_owner = %(owner)s,
    lease_expires_at = %(until)s, fence = nextval('oncely_fences'),
    started_at = GREATEST(%(now)s::timestamptz, o.run_after),
    finished_at = NULL, worker = %(owner)s
FROM oncely_schedules s
WHERE o.id = ANY(ARRAY(SELECT id FROM picked))
  AND o.scheduled_for = ANY(ARRAY(SELECT scheduled_for FROM picked)) AND s.id = o.schedule_id
RETURNING o.id, o.schedule_id, o.tenant, s.key, s.job, s.payload, o.scheduled_for, o.run_after,
    o.attempts, o.fence, o.lease_owner, o.lease_expires_at, o.origin, s.consecutive_failures;

-- name: lock_schedules
-- The candidates' schedules this claim gets to itself; one locked elsewhere is left for now.
-- Never waited for: a claim holds its occurrence rows, and save_schedule locks the schedule
-- and then its pending occurrences, so waiting here was a deadlock. Of two claimers of one
-- serial schedule the second skips it, and the first admits one occurrence.
SELECT id FROM oncely_schedules WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id
FOR UPDATE SKIP LOCKED;

-- name: skip_overlapped
-- Occurrences materialised ahead of their time whose schedule still ran another when they came
-- due (overlap='skip'): skipped with the reason, as materialising at their time would have.
UPDATE oncely_occurrences SET status = 'skipped', reason = %(reason)s, finished_at = %(now)s
WHERE id = ANY(%(ids)s::bigint[]) AND scheduled_for BETWEEN %(earliest)s AND %(latest)s
  AND status = 'pending'
RETURNING id;

-- name: busy_schedules
-- Schedules with an occurrence running under a live lease (an expired one is being reclaimed).
SELECT DISTINCT schedule_id FROM oncely_occurrences
WHERE schedule_id = ANY(%(ids)s::bigint[]) AND status = 'running'
  AND lease_expires_at IS NOT NULL AND lease_expires_at > %(now)s;

-- name: take_fences
SELECT nextval('oncely_fences') AS fence FROM generate_series(1, %(count)s);

-- name: start_attempts
-- One statement for the whole batch.
UPDATE oncely_occurrences o
SET status = 'running', attempts = o.attempts + 1, lease_owner = %(owner)s,
    lease_expires_at = %(until)s, fence = v.fence,
    started_at = GREATEST(%(now)s::timestamptz, o.run_after), finished_at = NULL,
    worker = %(owner)s
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS v(id, fence)
WHERE o.id = v.id AND o.scheduled_for BETWEEN %(earliest)s AND %(latest)s;

-- name: select_claimed
-- previous_finished_at: when the schedule's occurrence before this one finished (one probe of
-- the unique index), for lateness measured from when a serial job could start it.
SELECT o.id, o.schedule_id, o.tenant, s.key, s.job, s.payload, o.scheduled_for, o.run_after,
    o.attempts, o.fence, o.lease_owner, o.lease_expires_at, o.origin, s.consecutive_failures,
    (SELECT p.finished_at FROM oncely_occurrences p
     WHERE p.schedule_id = o.schedule_id AND p.scheduled_for < o.scheduled_for
     ORDER BY p.scheduled_for DESC LIMIT 1) AS previous_finished_at
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.id = ANY(%(ids)s::bigint[]) AND o.scheduled_for BETWEEN %(earliest)s AND %(latest)s
ORDER BY o.run_after, o.id;

-- name: expired_of_jobs
-- Running occurrences of at_most_once jobs whose lease expired: their worker was lost mid-call.
SELECT o.id, o.fence, s.key, s.job, o.tenant, o.scheduled_for, o.lease_owner, o.attempts
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status = 'running' AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= %(now)s)
  AND s.job = ANY(%(jobs)s::text[])
ORDER BY o.lease_expires_at
FOR UPDATE OF o SKIP LOCKED;

-- name: abandon
-- Conditional on what was read: still running with the same fence, lease still expired. A
-- worker slow but alive may have extended the lease since it was read.
UPDATE oncely_occurrences
SET status = 'abandoned', finished_at = %(now)s, lease_owner = NULL, lease_expires_at = NULL,
    reason = %(reason)s
WHERE id = %(id)s AND scheduled_for = %(scheduled_for)s AND status = 'running'
  AND fence = %(fence)s AND (lease_expires_at IS NULL OR lease_expires_at <= %(now)s);

-- name: extend_leases
-- Only the holder of an attempt's fence extends: a lease taken over is never given back. One
-- statement for every lease a worker holds: one transaction per claim was up to 1,000 a beat.
-- This and the other statements joined to arrays of claims (book_success, release_claims,
-- mark_left_running) run after join_by_hash and read their rows by primary key.
UPDATE oncely_occurrences o SET lease_expires_at = v.expires
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[], %(untils)s::timestamptz[])
    AS v(id, fence, expires)
WHERE o.id = v.id AND o.id = ANY(%(ids)s::bigint[])
  AND o.scheduled_for BETWEEN %(earliest)s AND %(latest)s
  AND o.status IS NOT DISTINCT FROM 'running' AND o.fence = v.fence
RETURNING o.id;

-- name: book_success
-- Conditional on each attempt's fence: of two bookings of one attempt only the first counts, and
-- an attempt whose lease was taken over books nothing (a NULL fence never matches). It sends
-- notify_outcome's notice itself, once and only if it booked any: sent as a statement of its own
-- it was one more round trip per booking.
WITH booked AS (
    UPDATE oncely_occurrences o
    SET status = 'succeeded', finished_at = %(now)s, error = NULL, lease_owner = NULL,
        lease_expires_at = NULL
    FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS v(id, fence)
    WHERE o.id = v.id AND o.id = ANY(%(ids)s::bigint[])
      AND o.scheduled_for BETWEEN %(earliest)s AND %(latest)s
      AND o.status IS NOT DISTINCT FROM 'running' AND o.fence = v.fence
    RETURNING o.id, o.schedule_id
), told AS MATERIALIZED (
    SELECT count(*) FROM (SELECT pg_notify('oncely_outcomes', '') FROM booked LIMIT 1) AS once
)
SELECT booked.id, booked.schedule_id FROM booked, told;

-- name: book_one_success
-- One attempt's success, conditional as book_success. Sent with the COMMIT of a transactional
-- handler's transaction in one round trip: a lost lease must make that COMMIT commit nothing, so
-- it fails the statement (division by zero) and the transaction with it. "IS NOT DISTINCT FROM"
-- (status is never NULL) keeps the planner off the running rows' partial index: with statistics
-- taken before a burst it chose that index over the primary key and read every running row
-- once per booking (1,700 rows each, 35 million in a burst of 20,000).
WITH booked AS (
    UPDATE oncely_occurrences
    SET status = 'succeeded', finished_at = %(now)s, error = NULL, lease_owner = NULL,
        lease_expires_at = NULL
    WHERE id = %(id)s AND scheduled_for = %(scheduled_for)s
      AND status IS NOT DISTINCT FROM 'running' AND fence = %(fence)s
    RETURNING id
)
SELECT 1 / count(*) AS booked FROM booked;

-- name: book_retry
-- The failed attempt is kept in oncely_attempts by the same statement (the retry overwrites the
-- row's attempt when it starts), up to kept attempts of one occurrence.
WITH booked AS (
    UPDATE oncely_occurrences
    SET status = 'retrying', run_after = %(retry_at)s, finished_at = %(now)s, error = %(error)s,
        lease_owner = NULL, lease_expires_at = NULL
    WHERE id = %(id)s AND scheduled_for = %(scheduled_for)s AND status = 'running'
      AND fence = %(fence)s
    RETURNING id, schedule_id, scheduled_for, attempts, started_at, finished_at, worker, fence,
        error
), kept AS (
    INSERT INTO oncely_attempts
        (occurrence_id, scheduled_for, attempt, outcome, started_at, finished_at, worker, fence,
         error)
    SELECT id, scheduled_for, attempts, 'failed', started_at, finished_at, worker, fence, error
    FROM booked
    WHERE attempts <= %(kept)s
    ON CONFLICT DO NOTHING
)
SELECT schedule_id FROM booked;

-- name: keep_attempt
-- Not used on PostgreSQL, where book_retry, reclaim and retry_failed keep the attempt they end
-- in the same statement; it exists so that both dialects keep one set of query names.
SELECT 1;

-- name: keep_lost_attempts
-- The attempts a claim takes over from lost workers (lease expired), kept before the claim
-- starts the next attempt over them, up to kept attempts of one occurrence. The row's error is
-- the attempt before's: this one booked none, so it is written here.
INSERT INTO oncely_attempts
    (occurrence_id, scheduled_for, attempt, outcome, started_at, finished_at, worker, fence, error)
SELECT id, scheduled_for, attempts, 'lost', started_at, %(now)s, worker, fence,
    'worker ' || coalesce(lease_owner, worker, '(unknown)') || ' was lost during attempt '
        || attempts || ' (lease expired); another worker took the occurrence over'
FROM oncely_occurrences
WHERE id = ANY(%(ids)s::bigint[]) AND scheduled_for BETWEEN %(earliest)s AND %(latest)s
  AND status = 'running' AND attempts <= %(kept)s
ON CONFLICT DO NOTHING;

-- name: book_failed
UPDATE oncely_occurrences
SET status = 'failed', finished_at = %(now)s, error = %(error)s, lease_owner = NULL,
    lease_expires_at = NULL
WHERE id = %(id)s AND scheduled_for = %(scheduled_for)s AND status = 'running'
  AND fence = %(fence)s
RETURNING schedule_id;

-- name: book_skipped
-- A claimed occurrence that is not run after all (claimed too late for its misfire policy):
-- skipped with the reason, and the attempt its claim counted given back.
UPDATE oncely_occurrences
SET status = 'skipped', reason = %(reason)s, finished_at = %(now)s, attempts = attempts - 1,
    lease_owner = NULL, lease_expires_at = NULL, started_at = NULL, worker = NULL
WHERE id = %(id)s AND scheduled_for = %(scheduled_for)s AND status = 'running'
  AND fence = %(fence)s
RETURNING id;

-- name: reset_failures
UPDATE oncely_schedules SET consecutive_failures = 0
WHERE id = ANY(%(ids)s::bigint[]) AND consecutive_failures <> 0;

-- name: count_failure
-- pause_after's NULL arm is spelled out: no limit never pauses. ``paused_now``: this statement
-- paused it (it was not paused before), read from the row locked first: RETURNING sees only the
-- new values, and a pause counted from them counted the failures of a paused schedule again.
WITH before AS (
    SELECT id AS locked_id, paused AS was_paused FROM oncely_schedules
    WHERE id = %(schedule_id)s FOR UPDATE
)
UPDATE oncely_schedules
SET consecutive_failures = consecutive_failures + 1,
    paused = paused OR (%(pause_after)s::integer IS NOT NULL
                        AND consecutive_failures + 1 >= %(pause_after)s::integer),
    status_reason = CASE
        WHEN NOT paused AND %(pause_after)s::integer IS NOT NULL
             AND consecutive_failures + 1 >= %(pause_after)s::integer
        THEN 'paused after ' || (consecutive_failures + 1) || ' consecutive failed occurrences'
        ELSE status_reason END,
    -- The failures' pause lasts until resumed by hand, also over a pause with an end.
    paused_until = CASE
        WHEN %(pause_after)s::integer IS NOT NULL
             AND consecutive_failures + 1 >= %(pause_after)s::integer
        THEN NULL ELSE paused_until END,
    updated_at = %(now)s
FROM before
WHERE id = locked_id
RETURNING consecutive_failures, paused, paused AND NOT was_paused AS paused_now;

-- name: prefer_ordered_scans
-- Claims read the claimable index in order and stop after LIMIT rows. Right after a burst is
-- inserted the planner's statistics still say the table is nearly empty, and it chose to read and
-- sort the whole backlog instead: every claim cost time in proportion to the backlog. For this
-- transaction only, sorting is made the last resort. That makes the one sort a claim cannot
-- avoid (select_claimed, a few rows) cost 1e10 on paper, which crossed jit_above_cost: every claim
-- of a serial job spent about 180 ms compiling 0.1 ms of work. So JIT is off too.
SELECT set_config('enable_sort', 'off', true), set_config('jit', 'off', true);

-- name: join_by_hash
-- Run first in the transaction of each statement joined to arrays of claims (extend_leases and
-- the like). Statistics taken before a burst, or none yet on a new partition, say "no running
-- rows"; the planner then read every running row (or every row of the burst's instant) once per
-- claim in the arrays, in a nested loop: a booking of 60 claims read 240,000 rows and took
-- 100 ms, and a worker draining a burst spent 4 s of 6 in its loop waiting on its bookings.
-- Without nested loops the arrays are hashed, and each statement reads its rows once, by the
-- primary key ("o.id = ANY") where it can: "IS NOT DISTINCT FROM 'running'" (status is never
-- NULL) keeps it off the running rows' partial index. JIT off as in prefer_ordered_scans: the
-- one join left that needs a nested loop (a row of counts) costs 1e10 on paper.
SELECT set_config('enable_nestloop', 'off', true), set_config('jit', 'off', true);

-- name: code_schedule_keys
-- The schedules declared in code that still fire or wait (reconciled on start by job name).
SELECT key FROM oncely_schedules
WHERE tenant = %(tenant)s AND origin = 'code' AND status <> 'removed'
ORDER BY key;

-- name: notify_change
-- Committed with every change that makes something due sooner: a watching worker wakes early
-- instead of sleeping to the due time it computed before the change. Never on claims and
-- bookings (bookings send notify_outcome). Notices of one transaction on one channel are
-- delivered once.
SELECT pg_notify('oncely', '');

-- name: listen_changes
LISTEN oncely;

-- name: notify_outcome
-- Committed with every booking (one per booking statement, not per row), on a channel of its
-- own: the dashboard listens to it, the workers do not (an outcome makes nothing due sooner,
-- and a wake-up per booking in every worker was what keeping bookings silent avoided).
SELECT pg_notify('oncely_outcomes', '');

-- name: listen_outcomes
LISTEN oncely_outcomes;

-- name: take_lease_token
-- Not used on PostgreSQL, where acquire_lease takes its token from the sequence in the same
-- statement; it exists so that both dialects keep one set of query names.
SELECT nextval('oncely_lease_tokens') AS token;

-- name: acquire_lease
-- Takes the name when it is free or its holder's lease ran out (expires_at is NOT NULL: no NULL
-- arm). Of two callers racing, the second waits on the first's row, then re-checks the WHERE
-- against it, finds it live and returns nothing. GREATEST keeps tokens increasing per name even
-- when a caller's nextval was taken before the current holder's.
INSERT INTO oncely_leases (name, owner, expires_at, token)
VALUES (%(name)s, %(owner)s, %(until)s, nextval('oncely_lease_tokens'))
ON CONFLICT (name) DO UPDATE SET
    owner = excluded.owner,
    expires_at = excluded.expires_at,
    token = GREATEST(excluded.token, oncely_leases.token + 1)
WHERE oncely_leases.expires_at <= %(now)s
RETURNING name, owner, token, expires_at;

-- name: renew_lease
-- Only with the name's current token, and never a released lease (released is the epoch).
UPDATE oncely_leases SET expires_at = %(until)s
WHERE name = %(name)s AND token = %(token)s AND expires_at > %(released)s
RETURNING name, owner, token, expires_at;

-- name: release_lease
-- The row stays, with its token, so that the next acquisition's token is greater still.
UPDATE oncely_leases SET expires_at = %(released)s
WHERE name = %(name)s AND token = %(token)s AND expires_at > %(released)s
RETURNING name;

-- name: database_now
SELECT clock_timestamp() AS now;

-- name: lease_holder
SELECT name, owner, token, expires_at FROM oncely_leases
WHERE name = %(name)s AND expires_at > %(now)s;

-- name: insert_sweep
INSERT INTO oncely_sweeps (worker, started_at, finished_at, pruned, reclaimed, abandoned, error)
VALUES (%(worker)s, %(started_at)s, %(finished_at)s, %(pruned)s, %(reclaimed)s, %(abandoned)s,
        %(error)s);

-- name: select_sweeps
SELECT worker, started_at, finished_at, pruned, reclaimed, abandoned, error
FROM oncely_sweeps
ORDER BY finished_at DESC, id DESC
LIMIT %(limit)s;

-- name: prune_occurrences
-- Finished occurrences only: pending, running and retrying ones are what the engine works from.
-- NULL arm: one that never ran (skipped, invalid) has no finished_at; its scheduled_for stands
-- in. The oldest first within each tenant, by oncely_occurrences_history (tenant,
-- scheduled_for), the tenants found by skipping through it (one probe each): a batch reads its
-- own rows and the unfinished ones among them (few: a schedule keeps at most its lead ahead
-- unstarted), whatever the history's size. SKIP LOCKED leaves a row that a backfill is re-arming
-- right now. The ids go through an array, found once: as "id IN (subquery)" the planner joined
-- them to a second scan of the whole table.
DELETE FROM oncely_occurrences
WHERE id = ANY(ARRAY(
    WITH RECURSIVE tenants (tenant) AS (
        (SELECT tenant FROM oncely_occurrences ORDER BY tenant LIMIT 1)
        UNION ALL
        SELECT (SELECT o.tenant FROM oncely_occurrences o
                WHERE o.tenant > t.tenant ORDER BY o.tenant LIMIT 1)
        FROM tenants t WHERE t.tenant IS NOT NULL
    )
    SELECT p.id FROM tenants t CROSS JOIN LATERAL (
        SELECT id FROM oncely_occurrences
        WHERE tenant = t.tenant
          AND status IN ('succeeded', 'failed', 'skipped', 'abandoned', 'invalid')
          AND status = ANY(%(statuses)s::text[])
          AND scheduled_for < %(before)s AND (finished_at < %(before)s OR finished_at IS NULL)
        ORDER BY scheduled_for
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) p
    LIMIT %(limit)s
));

-- name: prune_sweeps
DELETE FROM oncely_sweeps WHERE finished_at < %(before)s;

-- name: prune_actions
-- Actions are a record beside history and go with it: kept as long as the occurrences are.
-- Read in full (no index leads with the time): a few rows per person-day, never a hot table.
DELETE FROM oncely_actions WHERE at < %(before)s;

-- name: reclaimable
-- Running occurrences whose worker was lost (lease expired; a missing lease counts as expired),
-- of jobs that may run again. SKIP LOCKED: a claim reclaiming the same row keeps it.
SELECT o.id, o.fence, s.key, s.job, s.status AS schedule_status, o.tenant, o.scheduled_for,
    o.lease_owner, o.attempts
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status = 'running' AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= %(now)s)
  AND s.job = ANY(%(jobs)s::text[])
ORDER BY o.lease_expires_at
FOR UPDATE OF o SKIP LOCKED;

-- name: reclaim
-- Conditional on what was read: still running, the same fence (NULL arm spelled out), lease
-- still expired. A claim that took the row over in between changed all three.
-- A lost attempt retried is kept in oncely_attempts by the same statement, as book_retry keeps
-- a failed one; a failed occurrence's row keeps its last attempt itself.
WITH reclaimed AS (
    UPDATE oncely_occurrences
    SET status = %(status)s,
        run_after = CASE WHEN %(status)s = 'retrying' THEN %(now)s ELSE run_after END,
        finished_at = %(now)s, error = %(error)s, lease_owner = NULL, lease_expires_at = NULL
    WHERE id = %(id)s AND scheduled_for = %(scheduled_for)s AND status = 'running'
      AND fence IS NOT DISTINCT FROM %(fence)s::bigint
      AND (lease_expires_at IS NULL OR lease_expires_at <= %(now)s)
    RETURNING id, schedule_id, scheduled_for, status, attempts, started_at, finished_at, worker,
        fence, error
), kept AS (
    INSERT INTO oncely_attempts
        (occurrence_id, scheduled_for, attempt, outcome, started_at, finished_at, worker, fence,
         error)
    SELECT id, scheduled_for, attempts, 'lost', started_at, finished_at, worker, fence, error
    FROM reclaimed
    WHERE status = 'retrying' AND attempts <= %(kept)s
    ON CONFLICT DO NOTHING
)
SELECT schedule_id FROM reclaimed;

-- name: release_claims
-- Undoes the claim of attempts that never started. The claim set started_at, finished_at and
-- worker over the previous attempt's; they go back to NULL. run_after is left as it was: a claim
-- taken ahead of its time and given back once ran a second early when it was moved to now.
UPDATE oncely_occurrences o
SET status = CASE WHEN o.attempts > 1 THEN 'retrying' ELSE 'pending' END,
    attempts = o.attempts - 1, lease_owner = NULL, lease_expires_at = NULL, started_at = NULL,
    finished_at = NULL, worker = NULL
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS v(id, fence)
WHERE o.id = v.id AND o.id = ANY(%(ids)s::bigint[])
  AND o.scheduled_for BETWEEN %(earliest)s AND %(latest)s
  AND o.status IS NOT DISTINCT FROM 'running' AND o.fence = v.fence
RETURNING o.id;

-- name: mark_left_running
-- A worker stopping with these attempts still running: only the reason changes, the lease runs
-- out on its own.
UPDATE oncely_occurrences o SET reason = %(reason)s
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS v(id, fence)
WHERE o.id = v.id AND o.id = ANY(%(ids)s::bigint[])
  AND o.scheduled_for BETWEEN %(earliest)s AND %(latest)s
  AND o.status IS NOT DISTINCT FROM 'running' AND o.fence = v.fence
RETURNING o.id;

-- name: see_code_version
INSERT INTO oncely_code_versions (fingerprint, first_seen_at, last_seen_at)
VALUES (%(fingerprint)s, %(now)s, %(now)s)
ON CONFLICT (fingerprint) DO UPDATE
SET last_seen_at = GREATEST(oncely_code_versions.last_seen_at, excluded.last_seen_at)
RETURNING fingerprint, first_seen_at, last_seen_at, applied_at;

-- name: applied_code_version
-- The version whose declarations were applied last (applied_at IS NULL: never applied, left out).
SELECT fingerprint, first_seen_at, last_seen_at, applied_at FROM oncely_code_versions
WHERE applied_at IS NOT NULL
ORDER BY applied_at DESC, first_seen_at DESC
LIMIT 1;

-- name: list_code_versions
SELECT fingerprint, first_seen_at, last_seen_at, applied_at FROM oncely_code_versions
ORDER BY last_seen_at DESC, fingerprint
LIMIT %(limit)s;

-- name: list_leases
-- A released lease keeps its row (see release_lease), expiring at released: not listed.
SELECT name, owner, token, expires_at FROM oncely_leases WHERE expires_at > %(released)s
ORDER BY name LIMIT %(limit)s;

-- name: mark_code_applied
UPDATE oncely_code_versions SET applied_at = %(now)s WHERE fingerprint = %(fingerprint)s;

-- name: raise_history_horizon
-- History before this may have been pruned (see prune_occurrences: every row it deletes is
-- scheduled before its `before`). Never moves back.
INSERT INTO oncely_horizons (name, before) VALUES ('history', %(before)s)
ON CONFLICT (name) DO UPDATE SET before = GREATEST(oncely_horizons.before, excluded.before);

-- name: history_horizon
SELECT before FROM oncely_horizons WHERE name = 'history';

-- name: prune_keyless_schedules
-- Finished one-offs deferred without a key, once no occurrence of theirs is left: nobody can
-- defer their key again, so nothing depends on them.
DELETE FROM oncely_schedules
WHERE id IN (
    SELECT s.id FROM oncely_schedules s
    WHERE s.keyless AND s.status IN ('ended', 'removed') AND s.updated_at < %(before)s
      AND NOT EXISTS (SELECT 1 FROM oncely_occurrences o WHERE o.schedule_id = s.id)
    LIMIT %(limit)s
);

-- name: orphaned
-- Running occurrences of jobs the sweeping worker does not declare, whose lease ran out before
-- lost_before: a worker declaring the job would have reclaimed them by then. Left alone, the
-- attempts of a job deleted from the code stayed "running" forever (DESIGN lesson 2).
SELECT o.id, o.fence, s.key, s.job, o.tenant, o.scheduled_for, o.lease_owner, o.attempts
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status = 'running' AND o.lease_expires_at <= %(lost_before)s AND NOT (s.job = ANY(%(jobs)s::text[]))
ORDER BY o.lease_expires_at
FOR UPDATE OF o SKIP LOCKED;

-- name: fail_orphan
-- Conditional on what was read: still running with the same fence, lease still expired before
-- lost_before. A worker slow but alive may have extended the lease since it was read.
UPDATE oncely_occurrences
SET status = 'failed', finished_at = %(now)s, lease_owner = NULL, lease_expires_at = NULL,
    error = %(error)s
WHERE id = %(id)s AND scheduled_for = %(scheduled_for)s AND status = 'running'
  AND fence = %(fence)s AND lease_expires_at <= %(lost_before)s;

-- name: insert_action
INSERT INTO oncely_actions (at, tenant, key, action, actor, reason, detail)
VALUES (%(at)s, %(tenant)s, %(key)s, %(action)s, %(actor)s, %(reason)s, %(detail)s);

-- name: select_actions
-- One schedule's actions (%(key)s given) or every one of the tenant's (%(key)s NULL).
SELECT at, tenant, key, action, actor, reason, detail FROM oncely_actions
WHERE tenant = %(tenant)s AND (%(key)s::text IS NULL OR key = %(key)s)
ORDER BY at DESC, id DESC
LIMIT %(limit)s;

-- name: retry_failed
-- A person gives a failed occurrence one more attempt; it keeps its attempts and its last error
-- until that attempt books its own outcome. Anything but failed is left alone. The failed
-- attempt is kept in oncely_attempts by the same statement: the next one overwrites the row's.
WITH retried AS (
    UPDATE oncely_occurrences
    SET status = 'retrying', run_after = %(now)s
    WHERE schedule_id = (SELECT id FROM oncely_schedules
                         WHERE tenant = %(tenant)s AND key = %(key)s)
      AND scheduled_for = %(scheduled_for)s AND status = 'failed'
    RETURNING id, scheduled_for, attempts, started_at, finished_at, worker, fence, error
), kept AS (
    INSERT INTO oncely_attempts
        (occurrence_id, scheduled_for, attempt, outcome, started_at, finished_at, worker, fence,
         error)
    SELECT id, scheduled_for, attempts, 'failed', started_at, finished_at, worker, fence, error
    FROM retried
    WHERE attempts BETWEEN 1 AND %(kept)s
    ON CONFLICT DO NOTHING
)
SELECT id FROM retried;

-- name: schedule_states
-- The schedules that wait for a person, by job: paused ones (``paused_failing``: with failed
-- occurrences since their last success, as pause_after leaves them) and invalid ones. Read from
-- the partial index oncely_schedules_stopped, whose condition is repeated here word for word (so
-- the planner can use it): a handful of rows, never the schedule table. A removed or ended
-- schedule is not waiting for anyone, paused or not.
SELECT job,
    CASE WHEN status = 'invalid' THEN 'invalid'
         WHEN consecutive_failures > 0 THEN 'paused_failing'
         ELSE 'paused' END AS state,
    count(*) AS schedules
FROM oncely_schedules
WHERE (paused OR status = 'invalid') AND status IN ('active', 'invalid')
GROUP BY 1, 2;

-- name: job_counts
SELECT job, count(*) AS schedules FROM oncely_schedules WHERE status <> 'removed' GROUP BY job;

-- name: select_running
-- Every tenant's occurrences under a lease now, soonest expiry first. 'running' is written in,
-- not bound: only so is the partial index oncely_occurrences_leased used, and history's
-- catch-all query for status 'running' read the whole table when nothing ran.
SELECT s.key, o.tenant, o.scheduled_for, o.status, o.attempts, o.started_at, o.finished_at,
    o.worker, o.error, o.reason, o.local_wall, o.fold, o.dst_note, o.ordinal, o.origin, o.run_after,
    o.lease_expires_at, o.fence
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status = 'running'
ORDER BY o.lease_expires_at, o.id
LIMIT %(limit)s;

-- name: beat_worker
-- A worker's heartbeat: its row, made on the first beat. A late beat (a clock stepped back)
-- never moves the heartbeat back.
INSERT INTO oncely_workers
    (name, started_at, heartbeat_at, oncely_version, code_version)
VALUES (%(name)s, %(started_at)s, %(heartbeat_at)s, %(oncely_version)s, %(code_version)s)
ON CONFLICT (name) DO UPDATE SET
    heartbeat_at = GREATEST(oncely_workers.heartbeat_at, excluded.heartbeat_at),
    oncely_version = excluded.oncely_version, code_version = excluded.code_version;

-- name: forget_worker
DELETE FROM oncely_workers WHERE name = %(name)s;

-- name: forget_silent_workers
DELETE FROM oncely_workers WHERE heartbeat_at < %(before)s;

-- name: select_workers
-- Latest heartbeat first.
SELECT name, started_at, heartbeat_at, oncely_version, code_version
FROM oncely_workers
ORDER BY heartbeat_at DESC, name
LIMIT %(limit)s;

-- name: select_occurrence
-- One occurrence of schedule (tenant, key), by the (schedule_id, scheduled_for) index.
SELECT o.id, s.key, o.tenant, o.scheduled_for, o.status, o.attempts, o.started_at,
    o.finished_at, o.worker, o.error, o.reason, o.lease_expires_at, o.fence
FROM oncely_schedules s JOIN oncely_occurrences o ON o.schedule_id = s.id
WHERE s.tenant = %(tenant)s AND s.key = %(key)s AND o.scheduled_for = %(scheduled_for)s;

-- name: select_attempts
-- The kept attempts of one occurrence (those that did not end it), first first.
SELECT attempt, outcome, started_at, finished_at, worker, fence, error
FROM oncely_attempts
WHERE occurrence_id = %(id)s
ORDER BY attempt;

-- name: add_partitions
-- The day partitions (UTC) of occurrences from first_at's day to last_at's, those missing made
-- (see migration 0014: made apart and attached, they block no claim or booking).
SELECT oncely_add_partitions('oncely_occurrences', %(first_at)s, %(last_at)s) AS added;

-- name: partitions
-- The occurrences' day partitions, oldest first: each by its name (oncely_occurrences_pYYYYMMDD,
-- the UTC day it holds), its rows as the statistics estimate them (-1: never analyzed), whether
-- its detach was begun and not finished, and whether it is detached already (its drop was left
-- for a later sweep).
SELECT c.relname AS name, c.reltuples::bigint AS rows,
    coalesce(i.inhdetachpending, false) AS detaching, i.inhrelid IS NULL AS detached
FROM pg_class c LEFT JOIN pg_inherits i
    ON i.inhrelid = c.oid AND i.inhparent = 'oncely_occurrences'::regclass
WHERE c.relkind = 'r' AND c.relname LIKE 'oncely\_occurrences\_p%%'
  AND c.relnamespace = (SELECT relnamespace FROM pg_class
                        WHERE oid = 'oncely_occurrences'::regclass)
ORDER BY c.relname;

-- name: prune_attempts
-- The attempts kept of occurrences scheduled before `before`: gone with their day's partition.
DELETE FROM oncely_attempts
WHERE ctid = ANY(ARRAY(SELECT ctid FROM oncely_attempts WHERE scheduled_for < %(before)s
                       LIMIT %(limit)s));

-- name: date_attempts
-- Attempts a worker of schema version 13 kept (without their occurrence's time) get it: without
-- it they would stay when their day's partition goes.
UPDATE oncely_attempts a SET scheduled_for = o.scheduled_for
FROM oncely_occurrences o
WHERE a.scheduled_for IS NULL AND o.id = a.occurrence_id;

-- name: occurrences_partitioned
-- Whether oncely_occurrences is partitioned by day (schema version 14 and after).
SELECT relkind = 'p' AS partitioned FROM pg_class WHERE oid = 'oncely_occurrences'::regclass;
