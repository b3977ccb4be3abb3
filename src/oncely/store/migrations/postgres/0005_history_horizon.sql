-- What de-duplication relies on, kept apart from the history retention deletes.

-- How far back history is complete: pruning deletes finished occurrences scheduled before
-- `before` at most, so an occurrence at or after it is in the table if it was ever written.
-- Backfill reads it: before it, a pruned success looked like an occurrence that never ran, and
-- ran again.
CREATE TABLE oncely_horizons (
    name   text        PRIMARY KEY,
    before timestamptz NOT NULL
);

-- A one-off deferred without a key: nobody can defer its key again, so once it has finished
-- and its history is pruned the schedule row goes too. Without this every keyless defer()
-- left a row forever.
ALTER TABLE oncely_schedules ADD COLUMN keyless boolean NOT NULL DEFAULT false;
CREATE INDEX oncely_schedules_keyless_done ON oncely_schedules (updated_at)
    WHERE keyless AND status IN ('ended', 'removed');
