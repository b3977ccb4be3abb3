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
SELECT count(*) AS count FROM sqlite_master WHERE type = 'table' AND name = 'oncely_migrations';

-- name: upsert_schedules
-- One row per (tenant, key). A second save of the same key replaces what it runs and when, and
-- keeps the row (its id, paused flag and history). Run once per item of a batch (executemany):
-- one JSON parameter per batch, read back with ->> once per column of each row, took twice as
-- long. Nothing is returned: the caller holds the write lock and has read the existing rows.
INSERT INTO oncely_schedules
    (tenant, key, job, origin, trigger_kind, trigger_spec, payload, status, next_run_at,
     keyless, created_at, updated_at)
VALUES (:tenant, :key, :job, :origin, :trigger_kind, :trigger_spec, :payload, :status,
    :next_run_at, :keyless, :now, :now)
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
    updated_at = excluded.updated_at;

-- name: insert_schedules
-- Not used on SQLite, where a save has no round trips to spare and upsert_schedules is one
-- prepared statement run per row; it exists so that both dialects keep one set of names.
SELECT 1;

-- name: lock_schedules_to_save
-- The schedules of a save batch that exist, in any status ([tenant, key] pairs); the caller
-- holds the write lock. The history horizon comes with each (NULL: history was never pruned).
-- paused and created_at are what the upsert keeps of the row.
SELECT s.tenant, s.key, s.id, s.job, s.origin, s.trigger_spec, s.status, s.next_run_at,
    s.paused, s.created_at,
    (SELECT h.before FROM oncely_horizons h WHERE h.name = 'history') AS horizon
FROM json_each(:pairs) AS p
JOIN oncely_schedules s ON s.tenant = p.value ->> 0 AND s.key = p.value ->> 1;

-- name: select_schedule
SELECT id, tenant, key, job, origin, trigger_spec, payload, paused, paused_until, status,
    status_reason, next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE tenant = :tenant AND key = :key AND status <> 'removed';

-- name: select_schedules
-- One page of the schedules, by (tenant, key), after (after_tenant, after_key). Each filter's
-- NULL arm is spelled out: a NULL filter means "any". Listing a million per-user reminders at
-- once was the only way before. Unscheduled ones are listed only when asked for by status.
SELECT id, tenant, key, job, origin, trigger_spec, payload, paused, paused_until, status,
    status_reason, next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE (status <> 'removed' OR :status = 'removed')
  AND (:all_tenants OR tenant = :tenant)
  AND (:job IS NULL OR job = :job)
  AND (:status IS NULL OR status = :status)
  AND (:prefix IS NULL OR substr(key, 1, length(:prefix)) = :prefix)
  AND (:after_key IS NULL OR (tenant, key) > (:after_tenant, :after_key))
ORDER BY tenant, key
LIMIT coalesce(:limit, -1);

-- name: set_paused
UPDATE oncely_schedules SET paused = :paused, paused_until = :until, updated_at = :now
WHERE tenant = :tenant AND key = :key AND status <> 'removed'
RETURNING id, tenant, key, job, origin, trigger_spec, payload, paused, paused_until, status,
    status_reason, next_run_at, created_at, updated_at;

-- name: lock_ended_pauses
-- Schedules whose pause ended at or before now, to be resumed (end_pause); the caller holds the
-- write lock.
SELECT id, tenant, key, paused_until FROM oncely_schedules
WHERE paused_until IS NOT NULL AND paused_until <= :now AND paused = 1 AND status <> 'removed'
ORDER BY paused_until
LIMIT :limit;

-- name: end_pause
UPDATE oncely_schedules SET paused = 0, paused_until = NULL, updated_at = :now
WHERE id = :id;

-- name: skip_waiting
-- What a removed schedule had waiting (to run, or to retry) will not run: it is recorded so.
UPDATE oncely_occurrences SET status = 'skipped', reason = :reason
WHERE status IN ('pending', 'retrying')
  AND schedule_id = (SELECT id FROM oncely_schedules
                     WHERE tenant = :tenant AND key = :key AND status <> 'removed');

-- name: remove_schedule
-- A removed schedule stops firing and stays, with its occurrences, as history.
UPDATE oncely_schedules SET status = 'removed', next_run_at = NULL, updated_at = :now
WHERE tenant = :tenant AND key = :key AND status <> 'removed'
RETURNING id, tenant, key, job, origin, trigger_spec, payload, paused, paused_until, status,
    status_reason, next_run_at, created_at, updated_at;

-- name: advance_schedule
-- Compare-and-swap on next_run_at: of two processes materialising the same schedule, one moves it
-- on and the other finds nothing to do. The NULL arm is explicit: IS is SQLite's null-safe "=".
UPDATE oncely_schedules
SET next_run_at = :next_run_at,
    status = CASE WHEN :next_run_at IS NULL THEN 'ended' ELSE status END,
    updated_at = :now
WHERE tenant = :tenant AND key = :key AND status = 'active' AND next_run_at IS :expected
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
    (:schedule_id, :tenant, :scheduled_for, :local_wall, :fold, :dst_note, :ordinal, :origin,
     :status, :reason, :run_after, :now)
ON CONFLICT (schedule_id, scheduled_for) DO UPDATE SET
    local_wall = excluded.local_wall, fold = excluded.fold, dst_note = excluded.dst_note,
    ordinal = excluded.ordinal, origin = excluded.origin, status = excluded.status,
    reason = excluded.reason, run_after = excluded.run_after, created_at = excluded.created_at,
    finished_at = NULL
WHERE oncely_occurrences.status = 'skipped'
  AND ((oncely_occurrences.attempts = 0 AND oncely_occurrences.started_at IS NULL
        AND oncely_occurrences.reason LIKE 'superseded:%')
       OR oncely_occurrences.reason LIKE 'unscheduled:%');

-- name: next_schedule_due
-- The earliest next run of an active, unpaused schedule, or end of a pause (a wake-up time too),
-- in one round trip; each min() reads its own partial index. jobs NULL: any job; after NULL: any
-- time. min() over the two skips the NULL of an empty one.
SELECT min(due) AS due FROM (
    SELECT min(next_run_at) AS due FROM oncely_schedules
    WHERE status = 'active' AND paused = 0 AND next_run_at IS NOT NULL
      AND (:jobs IS NULL OR job IN (SELECT value FROM json_each(:jobs)))
      AND (:after IS NULL OR next_run_at > :after)
    UNION ALL
    SELECT min(paused_until) FROM oncely_schedules
    WHERE paused_until IS NOT NULL AND paused = 1 AND status <> 'removed'
      AND (:jobs IS NULL OR job IN (SELECT value FROM json_each(:jobs)))
      AND (:after IS NULL OR paused_until > :after)
);

-- name: next_occurrence_due
-- The earliest time a waiting or retrying occurrence may be claimed (the other half of the
-- wake-up), with the claim's own admission: an occurrence of a paused schedule, or of a job the
-- caller does not run, woke a worker that could not claim it, again and again.
-- likelihood(): as in claim_free, no Bloom filter of every schedule.
SELECT o.run_after AS due
FROM oncely_occurrences o CROSS JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE likelihood(o.status IN ('pending', 'retrying'), 0.0001)
  AND s.paused = 0 AND s.status <> 'removed'
  AND (:jobs IS NULL OR s.job IN (SELECT value FROM json_each(:jobs)))
  AND (:after IS NULL OR o.run_after > :after)
ORDER BY o.run_after, o.id
LIMIT 1;

-- name: select_history
-- Each filter's NULL arm is spelled out: a NULL filter means "any", never "matches NULL".
SELECT s.key, o.tenant, o.scheduled_for, o.status, o.attempts, o.started_at, o.finished_at,
    o.worker, o.error, o.reason, o.local_wall, o.fold, o.dst_note, o.ordinal, o.origin, o.run_after,
    o.lease_expires_at, o.fence
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE (:all_tenants OR o.tenant = :tenant)
  AND (:since IS NULL OR o.scheduled_for >= :since)
  AND (:until IS NULL OR o.scheduled_for < :until)
  AND (:status IS NULL OR o.status = :status)
ORDER BY o.scheduled_for DESC, o.id DESC
LIMIT :limit;

-- name: select_history_of_key
-- One key's history, as select_history: its tenants found by skipping through the schedules'
-- (tenant, key) index (one probe each), the key's schedule in each, and its occurrences through
-- the (schedule_id, scheduled_for) index. Walking history newest first until it had the key's
-- rows took 21 s at 10 M occurrences; reading the whole (tenant, key) index for the key grew
-- with the schedules (3.7 ms at 100,000). The schedule is a scalar subquery, not a join, and
-- likelihood() counts few tenants: analyzed, SQLite otherwise built a Bloom filter of every
-- schedule, or of every occurrence, first (7.6 ms at 1 M occurrences against 0.04).
WITH RECURSIVE tenants (tenant) AS (
    SELECT CASE WHEN :all_tenants THEN (SELECT min(tenant) FROM oncely_schedules)
                ELSE :tenant END
    UNION ALL
    SELECT (SELECT min(s.tenant) FROM oncely_schedules s WHERE s.tenant > t.tenant)
    FROM tenants t WHERE t.tenant IS NOT NULL AND :all_tenants
)
SELECT :key AS key, o.tenant, o.scheduled_for, o.status, o.attempts, o.started_at,
    o.finished_at, o.worker, o.error, o.reason, o.local_wall, o.fold, o.dst_note, o.ordinal,
    o.origin, o.run_after, o.lease_expires_at, o.fence
FROM tenants t CROSS JOIN oncely_occurrences o ON o.schedule_id = (
    SELECT id FROM oncely_schedules WHERE tenant = t.tenant AND key = :key
)
WHERE likelihood(t.tenant IS NOT NULL, 0.0001)
  AND (:since IS NULL OR o.scheduled_for >= :since)
  AND (:until IS NULL OR o.scheduled_for < :until)
  AND (:status IS NULL OR o.status = :status)
ORDER BY o.scheduled_for DESC, o.id DESC
LIMIT :limit;

-- name: lock_schedule
-- The schedule (tenant, key) in any status; the caller holds the write lock (BEGIN IMMEDIATE).
SELECT id, job, origin, trigger_spec, status, next_run_at FROM oncely_schedules
WHERE tenant = :tenant AND key = :key;

-- name: supersede_pending
-- A changed trigger replaces the future: what the old one planned and nobody started is skipped.
UPDATE oncely_occurrences SET status = 'skipped', reason = :reason
WHERE schedule_id IN (SELECT value FROM json_each(:ids)) AND status = 'pending'
  AND origin IN ('schedule', 'defer');

-- name: insert_saved_occurrences
-- One occurrence a save batch records (a one-off's single run), as insert_occurrence records
-- one, of the schedule (tenant, key) saved just before in the same transaction; run once per
-- occurrence (executemany).
INSERT INTO oncely_occurrences
    (schedule_id, tenant, scheduled_for, local_wall, fold, dst_note, ordinal, origin, status,
     reason, run_after, created_at)
VALUES ((SELECT s.id FROM oncely_schedules s WHERE s.tenant = :tenant AND s.key = :key),
    :tenant, :scheduled_for, :local_wall, :fold, :dst_note, :ordinal, :origin, :status, :reason,
    :scheduled_for, :now)
ON CONFLICT (schedule_id, scheduled_for) DO UPDATE SET
    local_wall = excluded.local_wall, fold = excluded.fold, dst_note = excluded.dst_note,
    ordinal = excluded.ordinal, origin = excluded.origin, status = excluded.status,
    reason = excluded.reason, run_after = excluded.run_after, created_at = excluded.created_at,
    finished_at = NULL
WHERE oncely_occurrences.status = 'skipped'
  AND ((oncely_occurrences.attempts = 0 AND oncely_occurrences.started_at IS NULL
        AND oncely_occurrences.reason LIKE 'superseded:%')
       OR oncely_occurrences.reason LIKE 'unscheduled:%');

-- name: identity
-- Not used on SQLite, where a caller's connection is compared by its file; it exists so that
-- both dialects keep one set of query names.
SELECT 1;

-- name: commit
-- Not used on SQLite, whose saves commit as every write does; it exists so that both dialects
-- keep one set of query names.
SELECT 1;

-- name: lock_schedules_to_materialise
-- Not used on SQLite, where BEGIN IMMEDIATE gives the batch the whole database; it exists so
-- that both dialects keep one set of query names.
SELECT 1;

-- name: due_schedules
-- Uses the partial index oncely_schedules_due; next_run_at's NULL arm is excluded explicitly.
-- The payload is not read: materialising never needs it, and 1 MB payloads read again with every
-- batch made a worker seconds late.
SELECT id, tenant, key, job, origin, trigger_spec, 'null' AS payload, paused, status,
    status_reason, next_run_at, created_at, updated_at
FROM oncely_schedules
WHERE status = 'active' AND paused = 0 AND next_run_at IS NOT NULL
  AND next_run_at > :after AND next_run_at <= :now AND job IN (SELECT value FROM json_each(:jobs))
ORDER BY next_run_at
LIMIT :limit;

-- name: supersede_stale
-- Pending occurrences of the schedule's own series older than the newest one planned now, never
-- started, while none of the schedule runs or waits to retry: superseded by it under misfire
-- 'skip' and 'latest'. Left pending, the one written just before every worker stopped ran (or
-- was skipped as too late) instead of the newest. One that waits for a running one (overlap
-- 'buffer_one') is not stale: it runs next.
UPDATE oncely_occurrences SET status = 'skipped', reason = :reason, finished_at = :now
WHERE schedule_id = :schedule_id AND status = 'pending' AND origin = 'schedule'
  AND attempts = 0 AND scheduled_for < :before
  AND NOT EXISTS (SELECT 1 FROM oncely_occurrences r
                  WHERE r.schedule_id = :schedule_id AND r.status IN ('running', 'retrying'));

-- name: in_progress
-- How many occurrences of a schedule wait (pending) and how many run or wait to retry.
SELECT count(*) FILTER (WHERE status = 'pending') AS waiting,
       count(*) FILTER (WHERE status <> 'pending') AS running
FROM oncely_occurrences
WHERE schedule_id = :schedule_id
  AND (status = 'pending' OR status = 'running' OR status = 'retrying');

-- name: schedule_id
SELECT id FROM oncely_schedules
WHERE tenant = :tenant AND key = :key AND status <> 'removed';

-- name: rearm_skipped
-- Backfill gives an occurrence that was skipped its run after all, once: a second backfill finds
-- it pending or finished and leaves it.
UPDATE oncely_occurrences
SET status = 'pending', origin = 'backfill', run_after = :now,
    reason = 'backfilled; skipped before: ' || coalesce(reason, 'no reason recorded')
WHERE schedule_id = :schedule_id AND scheduled_for = :scheduled_for AND status = 'skipped';

-- name: mark_invalid
UPDATE oncely_schedules
SET status = 'invalid', status_reason = :reason, next_run_at = NULL, updated_at = :now
WHERE id = :schedule_id;

-- name: claim_expired
-- CROSS JOIN fixes the join order in SQLite: occurrences by their partial index first. With few
-- occurrences and many schedules the planner otherwise scanned every schedule on every tick.
-- Occurrences whose worker was lost: running, lease expired, of jobs that may run again
-- (at_least_once and transactional). A running row with no lease at all (none is written so) is
-- left to the sweep's ``reclaimable``: the OR of it here made every claim read the index entry of
-- every running row, expired or not (1,000 of them per claim with 1,000 claims held).
-- The caller holds the write lock, so no two claimers see the same row.
-- likelihood(): as in claim_free, no Bloom filter of every schedule.
SELECT o.id, o.schedule_id, s.job, o.scheduled_for
FROM oncely_occurrences o CROSS JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status = 'running' AND likelihood(o.lease_expires_at <= :now, 0.0001)
  AND s.job IN (SELECT value FROM json_each(:jobs)) AND s.paused = 0 AND s.status <> 'removed'
ORDER BY o.lease_expires_at
LIMIT :limit;

-- name: claim_ready
-- Occurrences of serial jobs (overlap other than "allow") waiting to run or to retry whose time
-- has come, oldest first. The caller admits one per schedule. ``ahead``: pending from its
-- schedule and written before it came due, so overlap='skip' is judged now (skip_overlapped).
-- ``exclude``: schedules an earlier round of the same claim already saw. Without it a backlog
-- of one schedule filled every claim's limit with rows that could not run while its head ran,
-- and every other schedule's due occurrence waited behind it.
-- likelihood(): as in claim_free, no Bloom filter of every schedule.
SELECT o.id, o.schedule_id, s.job, o.scheduled_for, o.run_after,
    (o.origin = 'schedule' AND o.status = 'pending' AND o.created_at < o.run_after) AS ahead
FROM oncely_occurrences o CROSS JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status IN ('pending', 'retrying') AND likelihood(o.run_after <= :due_by, 0.0001)
  AND s.job IN (SELECT value FROM json_each(:jobs)) AND s.paused = 0 AND s.status <> 'removed'
  AND o.schedule_id NOT IN (SELECT value FROM json_each(:exclude))
ORDER BY o.run_after, o.id
LIMIT :limit;

-- name: claim_free
-- Occurrences of jobs that allow overlap waiting to run or to retry whose time has come, oldest
-- first: all of them are admitted. The same query as claim_ready, kept apart so that a backlog of
-- one serial schedule (admitted one at a time) never hides other jobs' due occurrences.
-- likelihood(): what it reads is a sliver of the table. Estimated as a share of the whole,
-- more rows than there are schedules, SQLite built a Bloom filter of every schedule first:
-- 97 ms per claim at 1 M schedules, 0.6 ms without.
SELECT o.id, o.schedule_id, s.job, o.scheduled_for
FROM oncely_occurrences o CROSS JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status IN ('pending', 'retrying') AND likelihood(o.run_after <= :due_by, 0.0001)
  AND s.job IN (SELECT value FROM json_each(:jobs)) AND s.paused = 0 AND s.status <> 'removed'
ORDER BY o.run_after, o.id
LIMIT :limit;

-- name: lock_schedules
-- Not used on SQLite, where the claim holds the database's write lock and no row needs one; it
-- exists so that both dialects keep one set of query names.
SELECT id FROM oncely_schedules WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id;

-- name: skip_overlapped
-- Occurrences materialised ahead of their time whose schedule still ran another when they came
-- due (overlap='skip'): skipped with the reason, as materialising at their time would have.
UPDATE oncely_occurrences SET status = 'skipped', reason = :reason, finished_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'pending'
RETURNING id;

-- name: busy_schedules
-- Schedules with an occurrence running under a live lease (an expired one is being reclaimed).
-- The first status term lets SQLite use the partial index oncely_occurrences_in_progress.
SELECT DISTINCT schedule_id FROM oncely_occurrences
WHERE schedule_id IN (SELECT value FROM json_each(:ids))
  AND (status = 'pending' OR status = 'running' OR status = 'retrying') AND status = 'running'
  AND lease_expires_at IS NOT NULL AND lease_expires_at > :now;

-- name: take_fences
-- Reserves :count fences; returns the last one reserved.
UPDATE oncely_fences SET value = value + :count WHERE id = 1 RETURNING value AS fence;

-- name: start_attempts
UPDATE oncely_occurrences
SET status = 'running', attempts = attempts + 1, lease_owner = :owner,
    lease_expires_at = :until, fence = :fence, started_at = MAX(:now, run_after), finished_at = NULL,
    worker = :owner
WHERE id = :id;

-- name: select_claimed
-- previous_finished_at: when the schedule's occurrence before this one finished (one probe of
-- the unique index), for lateness measured from when a serial job could start it.
SELECT o.id, o.schedule_id, o.tenant, s.key, s.job, s.payload, o.scheduled_for, o.run_after,
    o.attempts, o.fence, o.lease_owner, o.lease_expires_at, o.origin, s.consecutive_failures,
    (SELECT p.finished_at FROM oncely_occurrences p
     WHERE p.schedule_id = o.schedule_id AND p.scheduled_for < o.scheduled_for
     ORDER BY p.scheduled_for DESC LIMIT 1) AS previous_finished_at
FROM oncely_occurrences o JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.id IN (SELECT value FROM json_each(:ids))
ORDER BY o.run_after, o.id;

-- name: expired_of_jobs
-- Running occurrences of at_most_once jobs whose lease expired: their worker was lost mid-call.
-- likelihood(): as in claim_free, no Bloom filter of every schedule.
SELECT o.id, o.fence, s.key, s.job, o.tenant, o.scheduled_for, o.lease_owner, o.attempts
FROM oncely_occurrences o CROSS JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status = 'running'
  AND likelihood(o.lease_expires_at IS NULL OR o.lease_expires_at <= :now, 0.0001)
  AND s.job IN (SELECT value FROM json_each(:jobs))
ORDER BY o.lease_expires_at;

-- name: abandon
-- Conditional on what was read: still running with the same fence, lease still expired. A
-- worker slow but alive may have extended the lease since it was read.
UPDATE oncely_occurrences
SET status = 'abandoned', finished_at = :now, lease_owner = NULL, lease_expires_at = NULL,
    reason = :reason
WHERE id = :id AND status = 'running' AND fence = :fence
  AND (lease_expires_at IS NULL OR lease_expires_at <= :now);

-- name: extend_leases
-- Only the holder of an attempt's fence extends: a lease taken over is never given back. One
-- statement for every lease a worker holds. :leases is a JSON list of [occurrence id, fence,
-- new expiry] triples.
UPDATE oncely_occurrences SET lease_expires_at = v.expires
FROM (
    SELECT value ->> 0 AS id, value ->> 1 AS fence, value ->> 2 AS expires
    FROM json_each(:leases)
) AS v
WHERE oncely_occurrences.id = v.id AND oncely_occurrences.status = 'running'
  AND oncely_occurrences.fence = v.fence
RETURNING id;

-- name: book_success
-- Conditional on each attempt's fence: of two bookings of one attempt only the first counts, and
-- an attempt whose lease was taken over books nothing (a NULL fence never matches). :claims is a
-- JSON list of [occurrence id, fence] pairs.
UPDATE oncely_occurrences
SET status = 'succeeded', finished_at = :now, error = NULL, lease_owner = NULL,
    lease_expires_at = NULL
FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(:claims)) AS v
WHERE oncely_occurrences.id = v.id AND oncely_occurrences.status = 'running'
  AND oncely_occurrences.fence = v.fence
RETURNING id, schedule_id;

-- name: book_one_success
-- One attempt's success, conditional as book_success.
UPDATE oncely_occurrences
SET status = 'succeeded', finished_at = :now, error = NULL, lease_owner = NULL,
    lease_expires_at = NULL
WHERE id = :id AND status = 'running' AND fence = :fence
RETURNING id;

-- name: book_retry
UPDATE oncely_occurrences
SET status = 'retrying', run_after = :retry_at, finished_at = :now, error = :error,
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :id AND status = 'running' AND fence = :fence
RETURNING schedule_id;

-- name: keep_attempt
-- The attempt book_retry, reclaim (retrying) or retry_failed just ended on occurrence id, kept
-- in oncely_attempts in the same transaction (the next attempt overwrites the row's), up to kept
-- attempts of one occurrence. SQLite cannot insert from an UPDATE's RETURNING in one statement.
INSERT INTO oncely_attempts
    (occurrence_id, attempt, outcome, started_at, finished_at, worker, fence, error)
SELECT id, attempts, :outcome, started_at, finished_at, worker, fence, error
FROM oncely_occurrences
WHERE id = :id AND attempts BETWEEN 1 AND :kept
ON CONFLICT DO NOTHING;

-- name: keep_lost_attempts
-- The attempts a claim takes over from lost workers (lease expired), kept before the claim
-- starts the next attempt over them, up to kept attempts of one occurrence. The row's error is
-- the attempt before's: this one booked none, so it is written here.
INSERT INTO oncely_attempts
    (occurrence_id, attempt, outcome, started_at, finished_at, worker, fence, error)
SELECT id, attempts, 'lost', started_at, :now, worker, fence,
    'worker ' || coalesce(lease_owner, worker, '(unknown)') || ' was lost during attempt '
        || attempts || ' (lease expired); another worker took the occurrence over'
FROM oncely_occurrences
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'running' AND attempts <= :kept
ON CONFLICT DO NOTHING;

-- name: book_failed
-- ``was_paused``: the schedule's paused flag before count_failure, which reads only its own new
-- values (the write lock is held: nothing changes it in between).
UPDATE oncely_occurrences
SET status = 'failed', finished_at = :now, error = :error, lease_owner = NULL,
    lease_expires_at = NULL
WHERE id = :id AND status = 'running' AND fence = :fence
RETURNING schedule_id,
    (SELECT paused FROM oncely_schedules s WHERE s.id = oncely_occurrences.schedule_id)
        AS was_paused;

-- name: book_skipped
-- A claimed occurrence that is not run after all (claimed too late for its misfire policy):
-- skipped with the reason, and the attempt its claim counted given back.
UPDATE oncely_occurrences
SET status = 'skipped', reason = :reason, finished_at = :now, attempts = attempts - 1,
    lease_owner = NULL, lease_expires_at = NULL, started_at = NULL, worker = NULL
WHERE id = :id AND status = 'running' AND fence = :fence
RETURNING id;

-- name: reset_failures
UPDATE oncely_schedules SET consecutive_failures = 0
WHERE id IN (SELECT value FROM json_each(:ids)) AND consecutive_failures <> 0;

-- name: count_failure
-- pause_after's NULL arm is spelled out: no limit never pauses. ``paused_now``: this statement
-- paused it; ``was_paused`` is its flag before (from book_failed; NULL: not known, never a pause
-- of this statement's): RETURNING sees only the new values.
UPDATE oncely_schedules
SET consecutive_failures = consecutive_failures + 1,
    paused = paused OR (:pause_after IS NOT NULL AND consecutive_failures + 1 >= :pause_after),
    status_reason = CASE
        WHEN paused = 0 AND :pause_after IS NOT NULL AND consecutive_failures + 1 >= :pause_after
        THEN 'paused after ' || (consecutive_failures + 1) || ' consecutive failed occurrences'
        ELSE status_reason END,
    -- The failures' pause lasts until resumed by hand, also over a pause with an end.
    paused_until = CASE
        WHEN :pause_after IS NOT NULL AND consecutive_failures + 1 >= :pause_after
        THEN NULL ELSE paused_until END,
    updated_at = :now
WHERE id = :schedule_id
RETURNING consecutive_failures, paused, coalesce(paused = 1 AND :was_paused = 0, 0) AS paused_now;

-- name: join_by_hash
-- Not used on SQLite (nor is prefer_ordered_scans): its planner reads the arrays' rows by
-- primary key already.
SELECT 1;

-- name: prefer_ordered_scans
-- Not used on SQLite, whose planner reads the claimable index in order already; it exists so
-- that both dialects keep one set of query names.
SELECT 1;

-- name: code_schedule_keys
-- The schedules declared in code that still fire or wait (reconciled on start by job name).
SELECT key FROM oncely_schedules
WHERE tenant = :tenant AND origin = 'code' AND status <> 'removed'
ORDER BY key;

-- name: notify_change
-- Not used on SQLite, which has no channel between processes; it exists so that both dialects
-- keep one set of query names.
SELECT 1;

-- name: listen_changes
-- Not used on SQLite (see notify_change).
SELECT 1;

-- name: notify_outcome
-- Not used on SQLite (see notify_change).
SELECT 1;

-- name: listen_outcomes
-- Not used on SQLite (see notify_change).
SELECT 1;

-- name: take_lease_token
-- The caller holds the write lock, so tokens are taken one at a time, in order.
UPDATE oncely_lease_tokens SET value = value + 1 WHERE id = 1 RETURNING value AS token;

-- name: acquire_lease
-- Takes the name when it is free or its holder's lease ran out (expires_at is NOT NULL: no NULL
-- arm). The caller holds the write lock: no other acquisition runs in between.
INSERT INTO oncely_leases (name, owner, expires_at, token)
VALUES (:name, :owner, :until, :token)
ON CONFLICT (name) DO UPDATE SET
    owner = excluded.owner,
    expires_at = excluded.expires_at,
    token = max(excluded.token, oncely_leases.token + 1)
WHERE oncely_leases.expires_at <= :now
RETURNING name, owner, token, expires_at;

-- name: renew_lease
-- Only with the name's current token, and never a released lease (released is the epoch).
UPDATE oncely_leases SET expires_at = :until
WHERE name = :name AND token = :token AND expires_at > :released
RETURNING name, owner, token, expires_at;

-- name: release_lease
-- The row stays, with its token, so that the next acquisition's token is greater still.
UPDATE oncely_leases SET expires_at = :released
WHERE name = :name AND token = :token AND expires_at > :released
RETURNING name;

-- name: database_now
-- SQLite has no server clock: the store returns None without running this.
SELECT NULL AS now;

-- name: lease_holder
SELECT name, owner, token, expires_at FROM oncely_leases
WHERE name = :name AND expires_at > :now;

-- name: insert_sweep
INSERT INTO oncely_sweeps (worker, started_at, finished_at, pruned, reclaimed, abandoned, error)
VALUES (:worker, :started_at, :finished_at, :pruned, :reclaimed, :abandoned, :error);

-- name: select_sweeps
SELECT worker, started_at, finished_at, pruned, reclaimed, abandoned, error
FROM oncely_sweeps
ORDER BY finished_at DESC, id DESC
LIMIT :limit;

-- name: prune_occurrences
-- Finished occurrences only: pending, running and retrying ones are what the engine works from.
-- NULL arm: one that never ran (skipped, invalid) has no finished_at; its scheduled_for stands
-- in. The oldest first, by the partial index oncely_occurrences_prunable, whose WHERE is repeated
-- word for word (SQLite uses a partial index only then): a batch reads about its own rows,
-- whatever the history's size.
DELETE FROM oncely_occurrences
WHERE id IN (
    SELECT id FROM oncely_occurrences INDEXED BY oncely_occurrences_prunable
    WHERE (status = 'succeeded' OR status = 'failed' OR status = 'skipped'
           OR status = 'abandoned' OR status = 'invalid')
      AND status IN (SELECT value FROM json_each(:statuses))
      AND scheduled_for < :before AND (finished_at < :before OR finished_at IS NULL)
    ORDER BY scheduled_for
    LIMIT :limit
);

-- name: prune_sweeps
DELETE FROM oncely_sweeps WHERE finished_at < :before;

-- name: prune_actions
-- Actions are a record beside history and go with it: kept as long as the occurrences are.
-- Read in full (no index leads with the time): a few rows per person-day, never a hot table.
DELETE FROM oncely_actions WHERE at < :before;

-- name: reclaimable
-- Running occurrences whose worker was lost (lease expired; a missing lease counts as expired),
-- of jobs that may run again. CROSS JOIN: occurrences by their partial index first. Read without
-- the write lock; reclaim then re-checks each row under it.
-- likelihood(): as in claim_free, no Bloom filter of every schedule.
SELECT o.id, o.fence, s.key, s.job, s.status AS schedule_status, o.tenant, o.scheduled_for,
    o.lease_owner, o.attempts
FROM oncely_occurrences o CROSS JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status = 'running'
  AND likelihood(o.lease_expires_at IS NULL OR o.lease_expires_at <= :now, 0.0001)
  AND s.job IN (SELECT value FROM json_each(:jobs))
ORDER BY o.lease_expires_at;

-- name: reclaim
-- Conditional on what was read: still running, the same fence (IS: the NULL arm), lease still
-- expired. A claim that took the row over in between changed all three.
UPDATE oncely_occurrences
SET status = :status,
    run_after = CASE WHEN :status = 'retrying' THEN :now ELSE run_after END,
    finished_at = :now, error = :error, lease_owner = NULL, lease_expires_at = NULL
WHERE id = :id AND status = 'running' AND fence IS :fence
  AND (lease_expires_at IS NULL OR lease_expires_at <= :now)
RETURNING schedule_id;

-- name: release_claims
-- Undoes the claim of attempts that never started. The claim set started_at, finished_at and
-- worker over the previous attempt's; they go back to NULL. run_after is left as it was: a claim
-- taken ahead of its time and given back once ran a second early when it was moved to now.
-- :claims is a JSON list of [occurrence id, fence] pairs.
UPDATE oncely_occurrences
SET status = CASE WHEN attempts > 1 THEN 'retrying' ELSE 'pending' END,
    attempts = attempts - 1, lease_owner = NULL, lease_expires_at = NULL, started_at = NULL,
    finished_at = NULL, worker = NULL
FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(:claims)) AS v
WHERE oncely_occurrences.id = v.id AND oncely_occurrences.status = 'running'
  AND oncely_occurrences.fence = v.fence
RETURNING id;

-- name: mark_left_running
-- A worker stopping with these attempts still running: only the reason changes, the lease runs
-- out on its own. :claims is a JSON list of [occurrence id, fence] pairs.
UPDATE oncely_occurrences SET reason = :reason
FROM (SELECT value ->> 0 AS id, value ->> 1 AS fence FROM json_each(:claims)) AS v
WHERE oncely_occurrences.id = v.id AND oncely_occurrences.status = 'running'
  AND oncely_occurrences.fence = v.fence
RETURNING id;

-- name: see_code_version
INSERT INTO oncely_code_versions (fingerprint, first_seen_at, last_seen_at)
VALUES (:fingerprint, :now, :now)
ON CONFLICT (fingerprint) DO UPDATE
SET last_seen_at = max(oncely_code_versions.last_seen_at, excluded.last_seen_at)
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
LIMIT :limit;

-- name: list_leases
-- A released lease keeps its row (see release_lease), expiring at :released: not listed.
SELECT name, owner, token, expires_at FROM oncely_leases WHERE expires_at > :released
ORDER BY name LIMIT :limit;

-- name: mark_code_applied
UPDATE oncely_code_versions SET applied_at = :now WHERE fingerprint = :fingerprint;

-- name: raise_history_horizon
-- History before this may have been pruned (see prune_occurrences: every row it deletes is
-- scheduled before its `before`). Never moves back.
INSERT INTO oncely_horizons (name, before) VALUES ('history', :before)
ON CONFLICT (name) DO UPDATE SET before = max(oncely_horizons.before, excluded.before);

-- name: history_horizon
SELECT before FROM oncely_horizons WHERE name = 'history';

-- name: prune_keyless_schedules
-- Finished one-offs deferred without a key, once no occurrence of theirs is left: nobody can
-- defer their key again, so nothing depends on them.
DELETE FROM oncely_schedules
WHERE id IN (
    SELECT s.id FROM oncely_schedules s
    WHERE s.keyless AND s.status IN ('ended', 'removed') AND s.updated_at < :before
      AND NOT EXISTS (SELECT 1 FROM oncely_occurrences o WHERE o.schedule_id = s.id)
    LIMIT :limit
);

-- name: orphaned
-- Running occurrences of jobs the sweeping worker does not declare, whose lease ran out before
-- lost_before: a worker declaring the job would have reclaimed them by then. Left alone, the
-- attempts of a job deleted from the code stayed "running" forever (DESIGN lesson 2).
-- likelihood(): as in claim_free, no Bloom filter of every schedule.
SELECT o.id, o.fence, s.key, s.job, o.tenant, o.scheduled_for, o.lease_owner, o.attempts
FROM oncely_occurrences o CROSS JOIN oncely_schedules s ON s.id = o.schedule_id
WHERE o.status = 'running' AND likelihood(o.lease_expires_at <= :lost_before, 0.0001) AND s.job NOT IN (SELECT value FROM json_each(:jobs))
ORDER BY o.lease_expires_at;

-- name: fail_orphan
-- Conditional on what was read: still running with the same fence, lease still expired before
-- lost_before. A worker slow but alive may have extended the lease since it was read.
UPDATE oncely_occurrences
SET status = 'failed', finished_at = :now, lease_owner = NULL, lease_expires_at = NULL,
    error = :error
WHERE id = :id AND status = 'running' AND fence = :fence
  AND lease_expires_at <= :lost_before;

-- name: insert_action
INSERT INTO oncely_actions (at, tenant, key, action, actor, reason, detail)
VALUES (:at, :tenant, :key, :action, :actor, :reason, :detail);

-- name: select_actions
-- One schedule's actions (:key given) or every one of the tenant's (:key NULL).
SELECT at, tenant, key, action, actor, reason, detail FROM oncely_actions
WHERE tenant = :tenant AND (:key IS NULL OR key = :key)
ORDER BY at DESC, id DESC
LIMIT :limit;

-- name: retry_failed
-- A person gives a failed occurrence one more attempt; it keeps its attempts and its last error
-- until that attempt books its own outcome. Anything but failed is left alone.
UPDATE oncely_occurrences
SET status = 'retrying', run_after = :now
WHERE schedule_id = (SELECT id FROM oncely_schedules WHERE tenant = :tenant AND key = :key)
  AND scheduled_for = :scheduled_for AND status = 'failed'
RETURNING id;

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
WHERE (paused = 1 OR status = 'invalid') AND status IN ('active', 'invalid')
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
LIMIT :limit;

-- name: beat_worker
-- A worker's heartbeat: its row, made on the first beat. A late beat (a clock stepped back)
-- never moves the heartbeat back.
INSERT INTO oncely_workers
    (name, started_at, heartbeat_at, oncely_version, code_version)
VALUES (:name, :started_at, :heartbeat_at, :oncely_version, :code_version)
ON CONFLICT (name) DO UPDATE SET
    heartbeat_at = MAX(oncely_workers.heartbeat_at, excluded.heartbeat_at),
    oncely_version = excluded.oncely_version, code_version = excluded.code_version;

-- name: forget_worker
DELETE FROM oncely_workers WHERE name = :name;

-- name: forget_silent_workers
DELETE FROM oncely_workers WHERE heartbeat_at < :before;

-- name: select_workers
-- Latest heartbeat first.
SELECT name, started_at, heartbeat_at, oncely_version, code_version
FROM oncely_workers
ORDER BY heartbeat_at DESC, name
LIMIT :limit;

-- name: select_occurrence
-- One occurrence of schedule (tenant, key), by the (schedule_id, scheduled_for) index.
SELECT o.id, s.key, o.tenant, o.scheduled_for, o.status, o.attempts, o.started_at,
    o.finished_at, o.worker, o.error, o.reason, o.lease_expires_at, o.fence
FROM oncely_schedules s JOIN oncely_occurrences o ON o.schedule_id = s.id
WHERE s.tenant = :tenant AND s.key = :key AND o.scheduled_for = :scheduled_for;

-- name: select_attempts
-- The kept attempts of one occurrence (those that did not end it), first first.
SELECT attempt, outcome, started_at, finished_at, worker, fence, error
FROM oncely_attempts
WHERE occurrence_id = :id
ORDER BY attempt;

-- name: add_partitions
-- Not used on SQLite, which has no partitions; defined so both dialects name the same queries.
SELECT 0 AS added;

-- name: partitions
-- Not used on SQLite, which has no partitions; defined so both dialects name the same queries.
SELECT NULL AS name, 0 AS rows, 0 AS detaching WHERE 0;

-- name: prune_attempts
-- Not used on SQLite: its attempts go with their occurrence (ON DELETE CASCADE).
SELECT 0 WHERE 0;

-- name: date_attempts
-- Not used on SQLite: its attempts go with their occurrence (ON DELETE CASCADE).
SELECT 0 WHERE 0;

-- name: occurrences_partitioned
-- Not used on SQLite, which has no partitions; defined so both dialects name the same queries.
SELECT 0 AS partitioned;
