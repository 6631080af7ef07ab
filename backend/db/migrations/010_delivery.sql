-- Delivery: a pending send is due when next_attempt_at has passed. The column doubles as the lease
-- of a send being delivered (set into the future while a worker holds it), so due sends are found
-- by one range scan per pixel and a crashed worker's sends become due again when the lease ends.
UPDATE sends SET next_attempt_at = created_at WHERE next_attempt_at IS NULL;
ALTER TABLE sends ALTER COLUMN next_attempt_at SET DEFAULT now();
ALTER TABLE sends ALTER COLUMN next_attempt_at SET NOT NULL;

-- Replaces sends_pixel_pending (pixel_id, created_at): delivery orders and filters by due time.
DROP INDEX IF EXISTS sends_pixel_pending;
CREATE INDEX sends_due ON sends (pixel_id, next_attempt_at) WHERE status = 'pending';

-- Operators list a site's sends newest first (`sends list --site`), through the pixel.
CREATE INDEX sends_pixel_created ON sends (pixel_id, created_at DESC);
