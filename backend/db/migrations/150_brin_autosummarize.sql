-- Retention finds old visits and conversions along BRIN indexes on their time (migration 120). A
-- BRIN index cannot rule out page ranges written since it was last summarised, so a scan reads
-- every one of them: with track/init appending visits all day, that tail grows between VACUUMs.
-- autosummarize asks autovacuum to summarise each range as soon as it is full. The retention walk
-- also summarises what is new itself (backend/domain/erasure/retention.ts), since autovacuum's
-- work items can wait or be dropped under load.
ALTER INDEX visits_created_brin SET (autosummarize = on);
ALTER INDEX conversions_received_brin SET (autosummarize = on);
