-- oncely: outside a transaction
-- History across tenants and pruning read oncely_occurrences_history (tenant, scheduled_for)
-- instead, tenant by tenant. Every claim and every booking wrote an entry in each index on the
-- occurrences: with the index by time alone, 2 workers drained a burst of 20,000 one-offs 4 to
-- 13% slower than without either (alternated runs), and it was the largest index on the table
-- (46 MB per million rows).
-- CONCURRENTLY: a plain DROP INDEX queued for ACCESS EXCLUSIVE behind any open transaction on
-- the table (a transactional handler's), and every claim and booking of every worker queued
-- behind it. This waits for those transactions to end and blocks nobody while it waits.
DROP INDEX CONCURRENTLY IF EXISTS oncely_occurrences_prunable;
DROP INDEX CONCURRENTLY IF EXISTS oncely_occurrences_recent;
