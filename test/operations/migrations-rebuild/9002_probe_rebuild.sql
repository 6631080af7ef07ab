-- migrate: no transaction
-- A test-only migration (test/operations/migrator.test.ts): run again after a concurrent build of
-- its index failed and left the index INVALID.
CREATE INDEX CONCURRENTLY IF NOT EXISTS probe_rows_k ON probe_rows (k);
ANALYZE probe_rows;
