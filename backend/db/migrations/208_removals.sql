-- Removal keeps history: a removed account, site, channel, entry or pixel is marked, not deleted,
-- so the visits, joins and conversions it led to stay in reports and can still be erased. It no
-- longer appears in lists, serves the tracker, takes events or sends anything.
ALTER TABLE accounts ADD COLUMN removed_at timestamptz;
ALTER TABLE sites ADD COLUMN removed_at timestamptz;
ALTER TABLE channels ADD COLUMN removed_at timestamptz;
ALTER TABLE entries ADD COLUMN removed_at timestamptz;
ALTER TABLE pixels ADD COLUMN removed_at timestamptz;
