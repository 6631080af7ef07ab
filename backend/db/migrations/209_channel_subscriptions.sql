-- A paid channel: each visit's invite link is a Telegram Stars subscription link
-- (createChatSubscriptionInviteLink, 30 days per period), and a join through it is valued with the
-- site's Stars value. The price is Telegram's range, 1-2500 Stars a period.
ALTER TABLE channels ADD COLUMN subscription_price integer
  CHECK (subscription_price BETWEEN 1 AND 2500);
