-- Consent (docs/consent.md).
-- A site's consent mode: `implied`, a visit that says nothing of consent counts as granted;
-- `required`, as denied. Meta's Limited Data Use and TikTok's limited data use, per site.
ALTER TABLE sites
  ADD COLUMN consent_mode text NOT NULL DEFAULT 'implied' CHECK (consent_mode IN ('implied', 'required')),
  ADD COLUMN limited_data_use boolean NOT NULL DEFAULT false;

-- A visit without consent is kept for the funnel only: no IP, User-Agent, click ids, UTM tags or
-- cookie values, no PageView, and a join it leads to is organic.
ALTER TABLE visits ADD COLUMN consented boolean NOT NULL DEFAULT true;

-- A business event's own consent (Google's `adUserData` / `adPersonalization`); NULL: not given.
ALTER TABLE conversions
  ADD COLUMN ad_user_data_consent text CHECK (ad_user_data_consent IN ('GRANTED', 'DENIED')),
  ADD COLUMN ad_personalization_consent text CHECK (ad_personalization_consent IN ('GRANTED', 'DENIED'));
