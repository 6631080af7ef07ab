-- migrate: no transaction
-- A send is a conversion's or a visit's, never both, so one of its two subject keys is NULL. The
-- unique constraints indexed that NULL too: an index entry on every insert, and on every update
-- that is not heap-only (a claim, an outcome), that no lookup ever reads. The same uniqueness,
-- without the NULLs (ON CONFLICT DO NOTHING takes any unique index as its arbiter, partial ones
-- too, and the foreign keys' cascades look sends up by a subject id, which is never NULL).
-- The indexes are built concurrently: `sends` grows with every event, and a plain build would stop
-- the write path for as long as it reads the table. The constraints go once both are in place.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS sends_conversion_pixel ON sends (conversion_id, pixel_id) WHERE conversion_id IS NOT NULL;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS sends_visit_pixel ON sends (visit_id, pixel_id) WHERE visit_id IS NOT NULL;
ALTER TABLE sends DROP CONSTRAINT IF EXISTS sends_conversion_id_pixel_id_key, DROP CONSTRAINT IF EXISTS sends_visit_id_pixel_id_key;
