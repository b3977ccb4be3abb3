-- Nothing to do on SQLite: PostgreSQL's 0014 partitions occurrences by day, so that retention
-- drops a day's partition instead of deleting its rows. SQLite has no partitions; its pruning
-- deletes in bounded batches, each a short write transaction of its own. The version is kept in
-- step with PostgreSQL's, so that one schema version means the same migrations on both.
SELECT 1;
