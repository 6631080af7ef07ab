-- Retention of entry clicks (docs/data-lifecycle.md): a click no Telegram user ever brought back is
-- deleted after RETENTION_DAYS, a used one loses its payload then (the tie, its user and its visit
-- stay: the lead's acquisition and the join credits read them). The payload goes because it is the
-- click's bearer token: once gone, the same payload brought back is unknown, and organic.
ALTER TABLE entry_clicks ALTER COLUMN payload DROP NOT NULL;

-- The retention walk finds old clicks by time, as it does visits: a BRIN index costs the click's
-- insert next to nothing (rows arrive in time order).
CREATE INDEX entry_clicks_created_brin ON entry_clicks USING brin (created_at) WITH (pages_per_range = 16);
