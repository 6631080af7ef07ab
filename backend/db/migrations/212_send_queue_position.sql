-- A send's place in the delivery queue apart from its lease, so that claiming a send changes no
-- indexed column and PostgreSQL writes the claim as a heap-only (HOT) update: the new row version
-- beside the old one on the same page, and not one entry in any of the table's six indexes.
--
-- `next_attempt_at` stays what it was: when the send may be attempted next, the lease's end while
-- a worker holds it (and the token its outcomes are guarded by). `queue_at` is when the send last
-- joined the queue (created, a retry's time, put back by an operator) and is left alone by the
-- claim and by a lease's extension. Always queue_at <= next_attempt_at, so the due sends of a pixel
-- are found by a range scan of `sends_due` on queue_at, their lease checked on the row.
ALTER TABLE sends ADD COLUMN queue_at timestamptz NOT NULL DEFAULT now();
UPDATE sends SET queue_at = next_attempt_at WHERE status = 'pending';

DROP INDEX IF EXISTS sends_due;
CREATE INDEX sends_due ON sends (pixel_id, queue_at) WHERE status = 'pending';

-- Room on each page for the claim's new row version (a HOT update needs it on the same page);
-- PostgreSQL prunes the old versions as the page is next read, so the room is used again.
ALTER TABLE sends SET (fillfactor = 70);

-- A send is a conversion's or a visit's, never both, so one of its two subject keys is NULL. The
-- unique constraints indexed that NULL too: an index entry on every insert, and on every update
-- that is not heap-only (a send's outcome), that no lookup ever reads. The same uniqueness, without
-- the NULLs (ON CONFLICT DO NOTHING takes any unique index as its arbiter, partial ones too, and
-- the foreign keys' cascades look sends up by a subject id, which is never NULL).
CREATE UNIQUE INDEX sends_conversion_pixel ON sends (conversion_id, pixel_id) WHERE conversion_id IS NOT NULL;
CREATE UNIQUE INDEX sends_visit_pixel ON sends (visit_id, pixel_id) WHERE visit_id IS NOT NULL;
ALTER TABLE sends DROP CONSTRAINT sends_conversion_id_pixel_id_key, DROP CONSTRAINT sends_visit_id_pixel_id_key;
