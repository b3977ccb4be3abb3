-- The schedules that wait for a person: paused ones and ones stopped as invalid. /metrics counts
-- them on every scrape of every worker (Store.schedule_states), and this index holds only them:
-- the count reads a handful of rows, never the schedule table. Additive: workers of the
-- previous version run on while it applies.
CREATE INDEX oncely_schedules_stopped ON oncely_schedules (job)
    WHERE paused = 1 OR status = 'invalid';
