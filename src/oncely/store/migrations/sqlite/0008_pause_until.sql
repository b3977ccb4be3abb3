-- A pause may end by itself: paused_until is when (NULL: until resumed by hand). Additive, so
-- workers of the previous version run on while it applies; they only never end such a pause.
ALTER TABLE oncely_schedules ADD COLUMN paused_until integer;
-- The end of the next pause is a wake-up time and each prepare resumes the ended ones: both
-- read this index, a handful of rows, never the schedule table.
CREATE INDEX oncely_schedules_pause_ends ON oncely_schedules (paused_until)
    WHERE paused_until IS NOT NULL;
