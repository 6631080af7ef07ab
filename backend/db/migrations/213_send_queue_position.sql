-- migrate: no transaction
-- A send's place in the delivery queue apart from its lease, so that claiming a send changes no
-- indexed column and PostgreSQL writes the claim as a heap-only (HOT) update: the new row version
-- beside the old one on the same page, and not one entry in any of the table's indexes.
--
-- `next_attempt_at` stays what it was: when the send may be attempted next, the lease's end while
-- a worker holds it (and the token its outcomes are guarded by). `queue_at` is when the send last
-- joined the queue (created, a retry's time, put back by an operator) and is left alone by the
-- claim and by a lease's extension. Always queue_at <= next_attempt_at, so the due sends of a pixel
-- are found by a range scan of `sends_queue` on queue_at, their lease checked on the row.
--
-- `now()` is stable, so the column's default is stored once in the catalogue and the table is
-- not rewritten; the pending sends (a small part of a big table) then take their own time. The
-- index is built concurrently, as migration 212's: a plain build would stop the write path for
-- as long as it reads the table.
ALTER TABLE sends ADD COLUMN IF NOT EXISTS queue_at timestamptz NOT NULL DEFAULT now();
UPDATE sends SET queue_at = next_attempt_at WHERE status = 'pending' AND queue_at > next_attempt_at;
CREATE INDEX CONCURRENTLY IF NOT EXISTS sends_queue ON sends (pixel_id, queue_at) WHERE status = 'pending';
DROP INDEX CONCURRENTLY IF EXISTS sends_due;
-- Room on each page for the claim's new row version (a HOT update needs it on the same page);
-- PostgreSQL prunes the old versions as the page is next read, so the room is used again. Pages
-- written from now on keep it; the existing ones fill as they are pruned.
ALTER TABLE sends SET (fillfactor = 70);
