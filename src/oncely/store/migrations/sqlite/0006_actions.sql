-- What people did to schedules by hand (the dashboard's actions): who, when, why. History says
-- what fired; without this it could not say who paused a schedule or triggered a run.
CREATE TABLE oncely_actions (
    id     INTEGER PRIMARY KEY,
    at     integer NOT NULL,
    tenant text    NOT NULL DEFAULT '',
    key    text    NOT NULL,
    action text    NOT NULL,
    actor  text    NOT NULL,
    reason text    NOT NULL DEFAULT '',
    detail text
) STRICT;
CREATE INDEX oncely_actions_schedule ON oncely_actions (tenant, key, at, id);
CREATE INDEX oncely_actions_at ON oncely_actions (tenant, at, id);

-- Newest first across every tenant, as the dashboard's front page lists them: without it the
-- latest 20 of a million occurrences took a full sort (over a second). Built in the migration's
-- transaction, which holds back writes to occurrences while it builds (about a second per
-- million rows).
CREATE INDEX oncely_occurrences_recent ON oncely_occurrences (scheduled_for, id);
