-- Nothing to do on SQLite: PostgreSQL's 0013 drops the index by time and the partial index of
-- finished occurrences, and reads history and prunes tenant by tenant. SQLite keeps both: a
-- version 12 process's pruning names the partial index (INDEXED BY), and would fail on every
-- sweep without it until that process is replaced. The version is kept in step with
-- PostgreSQL's, so that one schema version means the same migrations on both.
SELECT 1;
