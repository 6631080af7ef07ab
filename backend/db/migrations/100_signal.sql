-- Signal fidelity. A site's country for phone numbers written nationally (ISO 3166-1 alpha-2,
-- NULL: none, such numbers are dropped), and how its Telegram joins are reported to the ad
-- platforms (`website`, with the visit's page and browser, or `chat`).
ALTER TABLE sites
  ADD COLUMN default_country text CHECK (default_country ~ '^[A-Z]{2}$'),
  ADD COLUMN telegram_action_source text NOT NULL DEFAULT 'website' CHECK (telegram_action_source IN ('website', 'chat'));
-- TikTok's `_ttp` and Snapchat's `_scid` first-party cookies, read on the landing page.
ALTER TABLE visits ADD COLUMN ttp text, ADD COLUMN scid text;
-- What the business API could not use of a conversion's PII (never the value itself), shown with its sends.
ALTER TABLE conversions ADD COLUMN pii_warnings text[] NOT NULL DEFAULT '{}';
