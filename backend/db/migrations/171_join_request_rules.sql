-- Join-request rules per channel. `approve-all` approves every request; `approve-attributed`
-- approves the requests that came through one of Capigram's links and holds the others for the
-- operator; `hold` holds all of them. Channels added before keep what they did: Capigram approved
-- its own links' requests and left the rest to the owner, which is `approve-attributed`.
ALTER TABLE channels ADD COLUMN join_requests text NOT NULL DEFAULT 'approve-all'
  CHECK (join_requests IN ('approve-all', 'approve-attributed', 'hold'));
UPDATE channels SET join_requests = 'approve-attributed';
-- Sent to the requester through the request's user_chat_id while it waits (Telegram allows 5 minutes).
ALTER TABLE channels ADD COLUMN welcome_text text CHECK (welcome_text IS NULL OR length(welcome_text) BETWEEN 1 AND 4096);

-- What became of a join request: `approving` (an approval is queued), `held` (waits for the
-- operator), `approved`, `declined`. NULL on other kinds, and on requests recorded before.
ALTER TABLE memberships ADD COLUMN request_status text
  CHECK (request_status IS NULL OR request_status IN ('approving', 'held', 'approved', 'declined'));
ALTER TABLE memberships ADD COLUMN request_decided_at timestamptz;
CREATE INDEX memberships_held_requests ON memberships (channel_id, occurred_at) WHERE request_status = 'held';
