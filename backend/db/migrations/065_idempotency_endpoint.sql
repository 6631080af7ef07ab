-- The endpoint (method and route pattern, `POST /api/v1/events/conversion`) an Idempotency-Key was
-- first used on. The same key on another endpoint within the replay window is refused (422
-- IDEMPOTENCY_KEY_REUSED) instead of replaying an answer that belongs to another request. Rows
-- written before this column existed have no endpoint and are replayed as before: they are gone
-- within two days (the purge).
ALTER TABLE idempotency_keys ADD COLUMN endpoint text;
