-- Join attribution through the Telegram webhook.

-- An update names a bot and a chat; that pair must lead to one channel, or a join could be
-- attributed to the wrong site. A bot may serve several sites, each through its own chats.
CREATE UNIQUE INDEX channels_bot_chat_active ON channels (bot_id, telegram_chat_id) WHERE active;

-- The conversion an attributed join created. One per (channel, user, invitation): a rejoin through
-- the same link is recorded as a membership but never converts twice.
ALTER TABLE memberships ADD COLUMN conversion_id uuid REFERENCES conversions(id) ON DELETE SET NULL;
CREATE UNIQUE INDEX memberships_one_conversion ON memberships (channel_id, telegram_user_id, invitation_id)
  WHERE conversion_id IS NOT NULL;
