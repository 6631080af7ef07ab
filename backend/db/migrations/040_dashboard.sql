-- The dashboard lists a site's conversions that wait for a manual value. Only waiting rows are in
-- this index, so the write path of every other conversion pays nothing for it.
CREATE INDEX conversions_awaiting ON conversions (site_id, received_at DESC) WHERE awaiting_manual_input;
