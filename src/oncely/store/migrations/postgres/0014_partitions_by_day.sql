-- oncely: outside a transaction
-- Occurrences partitioned by day (UTC) of scheduled_for, so that retention detaches and drops a
-- day's partition instead of deleting its rows one by one (a sweep's DELETEs cost time in
-- proportion to history, and left the table and its indexes bloated).
--
-- Online: the rows move in batches while workers of the previous version go on.
--  1. A partitioned table (oncely_occurrences_parted) beside the old one, with partitions for
--     the days the old one holds and the next seven.
--  2. A trigger on the old table mirrors every write made from then on into the new one.
--  3. oncely_copy_occurrences copies the rows that were there before, 10,000 per transaction,
--     each batch holding its rows FOR KEY SHARE (a prune cannot delete a row a batch is copying
--     and leave its copy behind).
--  4. oncely_switch_occurrences takes the old table for a moment (ACCESS EXCLUSIVE, tried with
--     a 200 ms lock timeout until it is had, so no worker waits longer than that) and swaps the
--     names: the statements of every version find the partitioned table as oncely_occurrences.
--  5. The old table is dropped.
-- Attempts no longer reference occurrences by a foreign key: a partitioned table is referenced
-- only by (id, scheduled_for), and DETACH would check every row of the day against it. The
-- attempts of a day go with it, by their own scheduled_for (0014 adds and fills the column).
-- Occurrences no longer reference schedules by one either: attaching a new day's partition
-- would add the key to it, which waits for SHARE ROW EXCLUSIVE on oncely_schedules, behind every
-- open transaction that wrote a schedule (a transactional handler's), with every later writer
-- of schedules queued behind it. A schedule is deleted in one place, prune_keyless_schedules,
-- and only when no occurrence of it is left.
-- Every statement may run again after a lost process: each checks what is done.
CREATE OR REPLACE FUNCTION oncely_add_partitions(
    parent regclass, first_at timestamptz, last_at timestamptz
) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    day date := (first_at AT TIME ZONE 'UTC')::date;
    last_day date := (last_at AT TIME ZONE 'UTC')::date;
    partition text;
    added integer := 0;
BEGIN
    WHILE day <= last_day LOOP
        partition := 'oncely_occurrences_p' || to_char(day, 'YYYYMMDD');
        IF to_regclass(partition) IS NULL THEN
            -- Two sessions adding the same day take turns here, and the second finds it made:
            -- taking a lock on a table also brings this session's view of the tables up to date
            -- (an advisory lock does not, and the second failed on "already exists").
            EXECUTE format('LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE', parent);
            IF to_regclass(partition) IS NULL THEN
                -- Made apart, then attached: CREATE TABLE ... PARTITION OF takes ACCESS
                -- EXCLUSIVE on the parent and waits behind every open transaction on it;
                -- ATTACH takes SHARE UPDATE EXCLUSIVE, which no claim or booking conflicts with.
                EXECUTE format(
                    'CREATE TABLE %I (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                    partition, parent
                );
                EXECUTE format(
                    'ALTER TABLE %s ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                    parent, partition,
                    day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC'
                );
                added := added + 1;
            END IF;
        END IF;
        day := day + 1;
    END LOOP;
    RETURN added;
END $$;

-- Until the switch (below) has made oncely_occurrences the partitioned table.
DO $$
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = 'oncely_occurrences'::regclass) = 'p' THEN
        RETURN;
    END IF;
    CREATE TABLE IF NOT EXISTS oncely_occurrences_parted (
        id               bigint GENERATED ALWAYS AS IDENTITY,
        schedule_id      bigint      NOT NULL,
        tenant           text        NOT NULL DEFAULT '',
        scheduled_for    timestamptz NOT NULL,
        local_wall       text,
        fold             smallint    NOT NULL DEFAULT 0,
        dst_note         text,
        ordinal          integer,
        origin           text        NOT NULL DEFAULT 'schedule'
            CHECK (origin IN ('schedule', 'trigger', 'backfill', 'defer')),
        status           text        NOT NULL
            CHECK (status IN ('pending', 'running', 'succeeded', 'retrying', 'failed', 'skipped',
                              'abandoned', 'invalid')),
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
        CONSTRAINT oncely_occurrences_parted_running_has_lease
            CHECK (status <> 'running' OR (lease_expires_at IS NOT NULL AND fence IS NOT NULL)),
        CONSTRAINT oncely_occurrences_parted_pkey PRIMARY KEY (id, scheduled_for),
        -- Exactly once is this constraint, not a code path (DESIGN lesson 1).
        CONSTRAINT oncely_occurrences_parted_once UNIQUE (schedule_id, scheduled_for)
    ) PARTITION BY RANGE (scheduled_for);
    CREATE INDEX IF NOT EXISTS oncely_occurrences_parted_claimable ON oncely_occurrences_parted
        (run_after, id) WHERE status IN ('pending', 'retrying');
    CREATE INDEX IF NOT EXISTS oncely_occurrences_parted_leased ON oncely_occurrences_parted
        (lease_expires_at) WHERE status = 'running';
    CREATE INDEX IF NOT EXISTS oncely_occurrences_parted_in_progress ON oncely_occurrences_parted
        (schedule_id) WHERE status IN ('pending', 'running', 'retrying');
    CREATE INDEX IF NOT EXISTS oncely_occurrences_parted_history ON oncely_occurrences_parted
        (tenant, scheduled_for);
    -- Today and the next seven days, what workers write while the rows are copied; the copy
    -- adds the days it finds, and the trigger any other.
    PERFORM oncely_add_partitions('oncely_occurrences_parted', now(), now() + interval '7 days');
END $$;

ALTER TABLE oncely_attempts ADD COLUMN IF NOT EXISTS scheduled_for timestamptz;

CREATE INDEX IF NOT EXISTS oncely_attempts_scheduled ON oncely_attempts (scheduled_for);

CREATE OR REPLACE FUNCTION oncely_mirror_occurrence() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM oncely_occurrences_parted
        WHERE id = OLD.id AND scheduled_for = OLD.scheduled_for;
        RETURN NULL;
    END IF;
    IF to_regclass('oncely_occurrences_p'
                   || to_char(NEW.scheduled_for AT TIME ZONE 'UTC', 'YYYYMMDD')) IS NULL THEN
        PERFORM oncely_add_partitions(
            'oncely_occurrences_parted', NEW.scheduled_for, NEW.scheduled_for
        );
    END IF;
    INSERT INTO oncely_occurrences_parted (
        id, schedule_id, tenant, scheduled_for, local_wall, fold, dst_note, ordinal, origin,
        status, reason, attempts, run_after, lease_owner, lease_expires_at, fence, started_at,
        finished_at, worker, error, created_at
    ) OVERRIDING SYSTEM VALUE
    VALUES (NEW.id, NEW.schedule_id, NEW.tenant, NEW.scheduled_for, NEW.local_wall, NEW.fold,
            NEW.dst_note, NEW.ordinal, NEW.origin, NEW.status, NEW.reason, NEW.attempts,
            NEW.run_after, NEW.lease_owner, NEW.lease_expires_at, NEW.fence, NEW.started_at,
            NEW.finished_at, NEW.worker, NEW.error, NEW.created_at)
    ON CONFLICT (id, scheduled_for) DO UPDATE SET
        schedule_id = excluded.schedule_id, tenant = excluded.tenant,
        local_wall = excluded.local_wall, fold = excluded.fold, dst_note = excluded.dst_note,
        ordinal = excluded.ordinal, origin = excluded.origin, status = excluded.status,
        reason = excluded.reason, attempts = excluded.attempts, run_after = excluded.run_after,
        lease_owner = excluded.lease_owner, lease_expires_at = excluded.lease_expires_at,
        fence = excluded.fence, started_at = excluded.started_at,
        finished_at = excluded.finished_at, worker = excluded.worker, error = excluded.error,
        created_at = excluded.created_at;
    RETURN NULL;
END $$;

DO $$
BEGIN
    IF to_regclass('oncely_occurrences_parted') IS NOT NULL THEN
        CREATE OR REPLACE TRIGGER oncely_mirror_occurrence
        AFTER INSERT OR UPDATE OR DELETE ON oncely_occurrences
        FOR EACH ROW EXECUTE FUNCTION oncely_mirror_occurrence();
    END IF;
END $$;

CREATE TABLE IF NOT EXISTS oncely_occurrences_copied (copied_to bigint NOT NULL);

INSERT INTO oncely_occurrences_copied (copied_to)
SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM oncely_occurrences_copied);

CREATE OR REPLACE PROCEDURE oncely_copy_occurrences(batch integer)
LANGUAGE plpgsql AS $$
DECLARE
    copied bigint;
    newest bigint;
BEGIN
    IF to_regclass('oncely_occurrences_parted') IS NULL THEN
        RETURN;  -- switched already
    END IF;
    -- Rows written since the trigger are mirrored by it: the copy stops at what was there.
    SELECT coalesce(max(id), 0) INTO newest FROM oncely_occurrences;
    LOOP
        SELECT copied_to INTO copied FROM oncely_occurrences_copied;
        EXIT WHEN copied >= newest;
        PERFORM oncely_add_partitions('oncely_occurrences_parted', day, day)
        FROM (SELECT DISTINCT date_trunc('day', scheduled_for AT TIME ZONE 'UTC')
                  AT TIME ZONE 'UTC' AS day
              FROM oncely_occurrences WHERE id > copied AND id <= copied + batch) AS held;
        INSERT INTO oncely_occurrences_parted (
            id, schedule_id, tenant, scheduled_for, local_wall, fold, dst_note, ordinal, origin,
            status, reason, attempts, run_after, lease_owner, lease_expires_at, fence,
            started_at, finished_at, worker, error, created_at
        ) OVERRIDING SYSTEM VALUE
        SELECT
            id, schedule_id, tenant, scheduled_for, local_wall, fold, dst_note, ordinal, origin,
            status, reason, attempts, run_after, lease_owner, lease_expires_at, fence,
            started_at, finished_at, worker, error, created_at
        FROM oncely_occurrences WHERE id > copied AND id <= copied + batch
        FOR KEY SHARE
        ON CONFLICT (id, scheduled_for) DO NOTHING;
        UPDATE oncely_occurrences_copied SET copied_to = copied + batch;
        COMMIT;
    END LOOP;
    UPDATE oncely_attempts a SET scheduled_for = o.scheduled_for
    FROM oncely_occurrences o
    WHERE a.scheduled_for IS NULL AND o.id = a.occurrence_id;
    COMMIT;
END $$;

CALL oncely_copy_occurrences(10000);

CREATE OR REPLACE PROCEDURE oncely_switch_occurrences()
LANGUAGE plpgsql AS $$
DECLARE
    next_id bigint;
BEGIN
    IF to_regclass('oncely_occurrences_parted') IS NULL THEN
        RETURN;  -- switched already
    END IF;
    LOOP
        BEGIN
            SET LOCAL lock_timeout = '200ms';
            LOCK TABLE oncely_occurrences, oncely_occurrences_parted, oncely_attempts
                IN ACCESS EXCLUSIVE MODE;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.5);
        END;
    END LOOP;
    DROP TRIGGER IF EXISTS oncely_mirror_occurrence ON oncely_occurrences;
    -- What a version 13 worker's attempt wrote while the rows were copied, and its time.
    UPDATE oncely_attempts a SET scheduled_for = o.scheduled_for
    FROM oncely_occurrences o
    WHERE a.scheduled_for IS NULL AND o.id = a.occurrence_id;
    ALTER TABLE oncely_attempts DROP CONSTRAINT IF EXISTS oncely_attempts_occurrence_id_fkey;
    SELECT coalesce(max(id), 0) + 1 INTO next_id FROM oncely_occurrences;
    ALTER TABLE oncely_occurrences RENAME TO oncely_occurrences_unpartitioned;
    ALTER TABLE oncely_occurrences_unpartitioned
        RENAME CONSTRAINT oncely_occurrences_pkey TO oncely_occurrences_unpartitioned_pkey;
    ALTER TABLE oncely_occurrences_unpartitioned
        RENAME CONSTRAINT oncely_occurrences_schedule_id_scheduled_for_key
        TO oncely_occurrences_unpartitioned_once;
    ALTER INDEX oncely_occurrences_claimable RENAME TO oncely_occurrences_unpartitioned_claimable;
    ALTER INDEX oncely_occurrences_leased RENAME TO oncely_occurrences_unpartitioned_leased;
    ALTER INDEX oncely_occurrences_in_progress
        RENAME TO oncely_occurrences_unpartitioned_in_progress;
    ALTER INDEX oncely_occurrences_history RENAME TO oncely_occurrences_unpartitioned_history;
    ALTER TABLE oncely_occurrences_parted RENAME TO oncely_occurrences;
    ALTER TABLE oncely_occurrences
        RENAME CONSTRAINT oncely_occurrences_parted_pkey TO oncely_occurrences_pkey;
    ALTER TABLE oncely_occurrences
        RENAME CONSTRAINT oncely_occurrences_parted_once
        TO oncely_occurrences_schedule_id_scheduled_for_key;
    ALTER TABLE oncely_occurrences RENAME CONSTRAINT oncely_occurrences_parted_running_has_lease
        TO oncely_occurrences_running_has_lease;
    ALTER TABLE oncely_occurrences
        RENAME CONSTRAINT oncely_occurrences_parted_origin_check TO oncely_occurrences_origin_check;
    ALTER TABLE oncely_occurrences
        RENAME CONSTRAINT oncely_occurrences_parted_status_check TO oncely_occurrences_status_check;
    ALTER INDEX oncely_occurrences_parted_claimable RENAME TO oncely_occurrences_claimable;
    ALTER INDEX oncely_occurrences_parted_leased RENAME TO oncely_occurrences_leased;
    ALTER INDEX oncely_occurrences_parted_in_progress RENAME TO oncely_occurrences_in_progress;
    ALTER INDEX oncely_occurrences_parted_history RENAME TO oncely_occurrences_history;
    EXECUTE format('ALTER TABLE oncely_occurrences ALTER COLUMN id RESTART WITH %s', next_id);
    COMMIT;
END $$;

CALL oncely_switch_occurrences();

DROP TABLE IF EXISTS oncely_occurrences_unpartitioned;

DROP TABLE IF EXISTS oncely_occurrences_copied;

DROP PROCEDURE IF EXISTS oncely_copy_occurrences(integer);

DROP PROCEDURE IF EXISTS oncely_switch_occurrences();

DROP FUNCTION IF EXISTS oncely_mirror_occurrence();

ALTER SEQUENCE IF EXISTS oncely_occurrences_parted_id_seq RENAME TO oncely_occurrences_id_seq;
