-- A join request whose approval or decline Telegram refused (the user is in too many chats, the
-- bot lacks the right to add members, the request is gone) is `failed`, with Telegram's reason,
-- and listed beside the held ones for the operator to retry or drop: never left "approving".
ALTER TABLE memberships DROP CONSTRAINT IF EXISTS memberships_request_status_check;
ALTER TABLE memberships ADD CONSTRAINT memberships_request_status_check
  CHECK (request_status IS NULL OR request_status IN ('approving', 'held', 'approved', 'declined', 'failed'));
ALTER TABLE memberships ADD COLUMN request_failure text;
DROP INDEX memberships_held_requests;
CREATE INDEX memberships_held_requests ON memberships (channel_id, occurred_at) WHERE request_status IN ('held', 'failed');
