-- Write paths whose cost stays flat as history grows (docs/benchmarks.md#a-year-of-history-and-retention).
--
-- An index keyed by a random UUID takes each new entry on a random page of itself. Small, those
-- pages are few and stay hot; at 10 million visits each index is hundreds of MB, and nearly every
-- entry lands on a page that has not been written since the last checkpoint, so it costs a
-- full-page image in the WAL (8 kB) and, past the cache, a read. A `track/init` wrote five such
-- entries for its visit and two for its PageView send: with a year of history the database spent
-- 170 µs more per visit than on an empty one.

-- Time-ordered ids (UUID version 7, RFC 9562: 48 bits of Unix milliseconds, then 74 random bits):
-- new rows' primary-key entries, and the entries of indexes that lead with such an id (a send's
-- `visit_id`, `conversion_id`), all go to the newest pages. 74 random bits keep an id as
-- unguessable as it needs to be; its time is the row's own creation time. PostgreSQL 17 and older
-- have no built-in: the random v4 id gets the time over its first 48 bits and its version nibble
-- turned from 4 to 7 (bits 52 and 53 of the bytea, numbered from each byte's lowest bit). A SQL
-- function of one expression is inlined where it is used, so a row pays a few operators for it.
CREATE FUNCTION capigram_uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
              PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
              FROM 1 FOR 6),
      52, 1), 53, 1),
    'hex')::uuid
$$;

ALTER TABLE visits ALTER COLUMN id SET DEFAULT capigram_uuid_v7();
ALTER TABLE sends ALTER COLUMN id SET DEFAULT capigram_uuid_v7();
ALTER TABLE conversions ALTER COLUMN id SET DEFAULT capigram_uuid_v7();
ALTER TABLE memberships ALTER COLUMN id SET DEFAULT capigram_uuid_v7();

-- One index on `visit_request_id` where there were two: the per-site unique key the retry upsert
-- arbitrates on, and a global look-up that refuses an id another site already used (a changed
-- websiteId, 409). Since an id is refused on every other site, one global unique key does both.
-- Two sites could have taken one id only in a race past that look-up: the later visit keeps its
-- row and loses its request id (a retry of it records a new visit, as a visit without one does).
UPDATE visits v SET visit_request_id = NULL
WHERE visit_request_id IS NOT NULL
  AND EXISTS (
    SELECT 1 FROM visits o
    WHERE o.visit_request_id = v.visit_request_id AND o.site_id <> v.site_id
      AND (o.created_at, o.id) < (v.created_at, v.id)
  );
CREATE UNIQUE INDEX visits_request ON visits (visit_request_id) WHERE visit_request_id IS NOT NULL;
ALTER TABLE visits DROP CONSTRAINT visits_site_id_visit_request_id_key;
DROP INDEX visits_request_id;

-- The session's latest visit is looked up with its browser (`findClickVisit`): the browser's index
-- finds it among that browser's visits, newest first, so the session needs no index of its own.
DROP INDEX visits_session;
