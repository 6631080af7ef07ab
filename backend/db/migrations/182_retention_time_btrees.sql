-- Retention finds old rows along B-trees on their time, no longer along BRIN indexes (migrations
-- 120, 150, 165, 181).
--
-- A BRIN index answers for a range of pages from a summary that can be wrong in more ways than a
-- walk can guard against, and each made every batch read most of the table:
-- - a range not summarised yet (the day's new rows) matches every query, and summarising it
--   waits for VACUUM's lock;
-- - a range that old and new rows share (retention and VACUUM make room in old pages, new rows
--   fill it) summarised as one interval matches every window between them (minmax-multi, 181);
-- - a summarisation cut short (autovacuum's autosummarize work item cancelled, a statement
--   cancelled) leaves a placeholder, and PostgreSQL's BRIN scan then treats every later range as
--   a placeholder too: brin_deform_tuple sets bt_placeholder on the memory tuple it reuses for the
--   whole scan and nothing clears it. Found in the retention benchmark: one placeholder at page
--   3,312 of 160,000, and a window of 640 rows read 159,063 pages (1.9 s) per batch; the same
--   window with a fresh index read 64.
-- A B-tree on a time that only grows takes each new entry on its rightmost page (as the
-- time-ordered primary keys of migration 180 do): little cost on the insert path, and a walk that
-- reads exactly its rows, whatever VACUUM, autovacuum or the free space map did meanwhile.
CREATE INDEX visits_created ON visits (created_at);
DROP INDEX visits_created_brin;

CREATE INDEX conversions_received ON conversions (received_at);
DROP INDEX conversions_received_brin;

CREATE INDEX entry_clicks_created ON entry_clicks (created_at);
DROP INDEX entry_clicks_created_brin;
