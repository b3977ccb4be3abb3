-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS oncely_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL
);

-- name: lock_migrations
-- Two processes starting together both migrate; this transaction-scoped lock lines them up.
SELECT pg_advisory_xact_lock(hashtext('oncely_migrations'));

-- name: applied_versions
SELECT version FROM oncely_migrations ORDER BY version;

-- name: record_migration
INSERT INTO oncely_migrations (version, name, applied_at) VALUES (%(version)s, %(name)s, %(applied_at)s);

-- name: migrations_table_exists
SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'oncely_migrations';
