-- Payments in Telegram (docs/telegram-payments.md).
-- The value of one Telegram Star for a site (`site update --stars-value CUR=AMOUNT`): a Stars
-- payment (`XTR`) is valued with it, and is sent to no platform while it is unset.
ALTER TABLE sites
  ADD COLUMN stars_value numeric(18,6) CHECK (stars_value IS NULL OR stars_value > 0),
  ADD COLUMN stars_value_currency char(3),
  ADD CONSTRAINT sites_stars_value_whole CHECK ((stars_value IS NULL) = (stars_value_currency IS NULL));
