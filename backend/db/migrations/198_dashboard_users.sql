-- People who sign in to the dashboard with an e-mail and a password, each with a role over the
-- whole instance, one account or one site. The e-mail is the login (not a lead's PII): kept
-- lower-cased so case never makes two users of one person. The password is kept only as a scrypt
-- hash; a user invited but not yet arrived has none. A removed user keeps its row (the audit log
-- names it) and loses its sessions in the same transaction.
CREATE TABLE dashboard_users (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email         text NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
  role          text NOT NULL CHECK (role IN ('owner', 'admin', 'viewer')),
  account_id    uuid REFERENCES accounts(id) ON DELETE CASCADE,
  site_id       uuid REFERENCES sites(id) ON DELETE CASCADE,
  password_hash text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  removed_at    timestamptz,
  -- A site-scoped user carries the site's account too, so "within this account" is one comparison.
  CHECK (site_id IS NULL OR account_id IS NOT NULL)
);
CREATE UNIQUE INDEX dashboard_users_email_live ON dashboard_users (email) WHERE removed_at IS NULL;

-- Invitation links: only the SHA-256 of the link's token is kept; a link works once, until it expires.
CREATE TABLE dashboard_invites (
  token_sha256 bytea PRIMARY KEY,
  user_id      uuid NOT NULL REFERENCES dashboard_users(id) ON DELETE CASCADE,
  expires_at   timestamptz NOT NULL,
  used_at      timestamptz
);
CREATE INDEX dashboard_invites_user ON dashboard_invites (user_id);

-- A session opened by a user's password names the user (NULL: opened with the admin token), so
-- removing the user ends its sessions at once.
ALTER TABLE dashboard_sessions
  ADD COLUMN user_id uuid REFERENCES dashboard_users(id) ON DELETE CASCADE;
CREATE INDEX dashboard_sessions_user ON dashboard_sessions (user_id) WHERE user_id IS NOT NULL;

-- Every change an operator makes, from the dashboard or the CLI: who, what, on what, when.
CREATE TABLE audit_log (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at         timestamptz NOT NULL DEFAULT now(),
  actor      text NOT NULL,
  user_id    uuid REFERENCES dashboard_users(id) ON DELETE SET NULL,
  action     text NOT NULL,
  target     text NOT NULL,
  account_id uuid,
  site_id    uuid,
  detail     jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_at ON audit_log (at DESC);
