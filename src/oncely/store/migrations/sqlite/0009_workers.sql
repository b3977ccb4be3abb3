-- One row per running worker, written by the worker itself with its minutely check (and when
-- it starts) and deleted when it stops: the dashboard's live workers (what each runs now is
-- read from the leases). A worker killed without stopping leaves its row; housekeeping deletes
-- rows silent for an hour. Additive: workers of the previous version run on while it applies,
-- and are simply not listed.
CREATE TABLE oncely_workers (
    name           text    PRIMARY KEY,
    started_at     integer NOT NULL,
    heartbeat_at   integer NOT NULL,
    oncely_version text    NOT NULL,
    code_version   text    NOT NULL
) STRICT;
CREATE INDEX oncely_workers_heartbeat ON oncely_workers (heartbeat_at);
