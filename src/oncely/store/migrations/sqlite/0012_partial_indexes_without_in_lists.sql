-- The same two partial indexes, their WHERE spelled as ORs of equalities. SQLite (3.40) tests a
-- row against an IN list of three or more values through a temporary b-tree it builds each time,
-- and an UPDATE that sets status tests every partial index naming status, for the row before and
-- after: every claim and every booking built four such b-trees a row. With 0007's prunable index
-- added, one worker drained a burst of 20,000 one-offs at 6,937 jobs a second, against 19,330
-- before it. The queries that read these indexes repeat the same ORs, as SQLite needs to use them.
-- Both are rebuilt while this migration holds the write lock.
DROP INDEX oncely_occurrences_prunable;
CREATE INDEX oncely_occurrences_prunable ON oncely_occurrences (scheduled_for)
    WHERE status = 'succeeded' OR status = 'failed' OR status = 'skipped' OR status = 'abandoned'
        OR status = 'invalid';
DROP INDEX oncely_occurrences_in_progress;
CREATE INDEX oncely_occurrences_in_progress ON oncely_occurrences (schedule_id)
    WHERE status = 'pending' OR status = 'running' OR status = 'retrying';
