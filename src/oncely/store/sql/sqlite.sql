-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS oncely_migrations (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at integer NOT NULL
) STRICT;

-- name: applied_versions
SELECT version FROM oncely_migrations ORDER BY version;

-- name: record_migration
INSERT INTO oncely_migrations (version, name, applied_at) VALUES (:version, :name, :applied_at);

-- name: lock_migrations
-- Two processes starting together both migrate; taking the write lock first lines them up.
BEGIN IMMEDIATE;

-- name: migrations_table_exists
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'oncely_migrations';
