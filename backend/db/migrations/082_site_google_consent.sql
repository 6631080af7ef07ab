-- The site's answer to Google's consent question for ad user data (`ClickConversion.consent.adUserData`):
-- NULL takes the configured default (GOOGLE_ADS_AD_USER_DATA_CONSENT), which may be to send none.
ALTER TABLE sites ADD COLUMN google_ad_user_data text CHECK (google_ad_user_data IN ('GRANTED', 'DENIED'));
