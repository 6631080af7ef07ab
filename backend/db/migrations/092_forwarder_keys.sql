-- Forwarder keys: a server that calls the keyless surface on a visitor's behalf (a Cloudflare
-- Worker, a proxy on another network) proves itself with one, instead of being trusted for its
-- address (TRUSTED_PROXIES), which for a CDN would trust every customer of that CDN. A key belongs
-- to one site; only its SHA-256 is kept, its prefix finds the row.
CREATE TABLE forwarder_keys (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  site_id      uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  name         text,
  prefix       text NOT NULL UNIQUE,
  secret_hash  bytea NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz
);
CREATE INDEX forwarder_keys_site ON forwarder_keys (site_id);
