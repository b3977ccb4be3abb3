-- Pruning reads this index: the finished occurrences, oldest scheduled first. Without it a
-- sweep read the occurrence table until it had found a batch (61 ms at 300,000 rows, growing
-- with history). The cost is one index entry per finished occurrence, written at its booking.
CREATE INDEX oncely_occurrences_prunable ON oncely_occurrences (scheduled_for)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'abandoned', 'invalid');
