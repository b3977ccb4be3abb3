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
