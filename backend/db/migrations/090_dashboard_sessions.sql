-- Dashboard sessions the server still honours. The cookie alone (expiry + HMAC keyed by
-- ADMIN_TOKEN) cannot be taken back before it expires: signing out deletes the row, so a copied
-- cookie dies with the sign-out instead of living on for twelve hours. Only a digest of the
-- cookie is kept, so the table is no list of working cookies.
CREATE TABLE dashboard_sessions (
  cookie_sha256 bytea PRIMARY KEY,
  expires_at timestamptz NOT NULL
);
