-- The time BRIN indexes (migrations 120, 150, 165) keep several intervals per page range instead
-- of one (minmax-multi, PostgreSQL 14+).
--
-- Retention clears old rows and VACUUM then records the room that made on their pages in the free
-- space map: the next visits, conversions and clicks are written into those old pages. With one
-- interval per range, a range of year-old rows that took a single new row summarises as "from a
-- year ago to now", and every later window of the retention walk, and every read of recent rows,
-- had to read it. Measured (300,000 expired visits, the older half cleared and vacuumed, then
-- 64,000 new visits, every one of which landed on an old page): the walk over the other half took
-- 8.98 s with one interval, 3.07 s with several. A million expired visits beside 1,700 inserts a
-- second had taken the walk 546 s. A range that holds old and new rows is now summarised as both,
-- and a window between them skips it.
CREATE INDEX visits_created_brin_multi ON visits
  USING brin (created_at timestamptz_minmax_multi_ops) WITH (pages_per_range = 16, autosummarize = on);
DROP INDEX visits_created_brin;
ALTER INDEX visits_created_brin_multi RENAME TO visits_created_brin;

CREATE INDEX conversions_received_brin_multi ON conversions
  USING brin (received_at timestamptz_minmax_multi_ops) WITH (pages_per_range = 16, autosummarize = on);
DROP INDEX conversions_received_brin;
ALTER INDEX conversions_received_brin_multi RENAME TO conversions_received_brin;

CREATE INDEX entry_clicks_created_brin_multi ON entry_clicks
  USING brin (created_at timestamptz_minmax_multi_ops) WITH (pages_per_range = 16, autosummarize = on);
DROP INDEX entry_clicks_created_brin;
ALTER INDEX entry_clicks_created_brin_multi RENAME TO entry_clicks_created_brin;
