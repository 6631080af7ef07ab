-- migrate: no transaction
-- A test-only migration (test/operations/migrator.test.ts): an index on a table that takes writes
-- while it is built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS probe_rows_at ON probe_rows (at);
