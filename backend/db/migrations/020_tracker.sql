-- The keyless tracker surface and the invite-link pools.

-- Rate-limit counters of the keyless surface, shared by every backend process (rate-limiter-flexible's
-- layout). UNLOGGED: the counters are worthless after a crash, and skipping the WAL keeps each
-- request's counter update off the commit path.
CREATE UNLOGGED TABLE capigram_rate_limits (
  key     varchar(255) PRIMARY KEY,
  points  integer NOT NULL DEFAULT 0,
  expire  bigint
);

-- A channel's public link handed out as a fallback is recorded once per click, so the same URL
-- repeats among unattributed invitations; the links Capigram creates stay unique.
ALTER TABLE invitations DROP CONSTRAINT invitations_invite_link_key;
CREATE UNIQUE INDEX invitations_link ON invitations (invite_link) WHERE NOT unattributed;

-- A visitRequestId already used on another site is a changed websiteId (409), found by this index.
CREATE INDEX visits_request_id ON visits (visit_request_id) WHERE visit_request_id IS NOT NULL;

-- CORS preflights carry no websiteId: their Origin is matched against every site's domains.
CREATE INDEX sites_domains ON sites USING gin (domains);

-- Telegram's flood control is per bot: once it answers 429, every process leaves the bot alone
-- until this instant (pool refills are rescheduled to it; clicks fall back at once).
ALTER TABLE bots ADD COLUMN flood_wait_until timestamptz;
