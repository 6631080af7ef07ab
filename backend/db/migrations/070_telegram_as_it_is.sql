-- Telegram as it really is.

-- A join Capigram recorded itself when its approveChatJoinRequest succeeded (the approval is the
-- join: the chat_member update that follows is sometimes never sent). When the update does come,
-- it is matched to that join (`update_matched_at`) and adds nothing.
ALTER TABLE memberships ADD COLUMN recorded_by text NOT NULL DEFAULT 'update' CHECK (recorded_by IN ('update', 'approval'));
ALTER TABLE memberships ADD COLUMN update_matched_at timestamptz;

-- Whether the chat is public (has a username), as getChat last said; join requests to public
-- chats arrive without their invite link, so join-request mode cannot attribute there.
ALTER TABLE channels ADD COLUMN chat_is_public boolean;

-- The periodic re-check of the bot's rights (getChatMember) picks the channels checked longest ago.
CREATE INDEX channels_rights_check ON channels (bot_status_at NULLS FIRST) WHERE active;
