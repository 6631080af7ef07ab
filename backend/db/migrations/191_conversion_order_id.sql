-- A business event's order (`orderId`): distinct orders are distinct conversions whatever the
-- dedup window, and the same order is one conversion however often it is reported.
--
-- The unique index is what makes "one order, one conversion" hold between transactions that do
-- not share a lock: events of one Telegram user run one at a time under the lead lock, but two
-- users (a checkout retried from another account, a CRM replaying an order under a wrong user id)
-- reporting the same order meet only here. The second insert waits for the first transaction and
-- then fails; the event is run again and finds the first one's conversion. Custom events are told
-- apart by their name, NULL for every other type (COALESCE: a NULL would make every row distinct).
ALTER TABLE conversions
  ADD COLUMN order_id text CHECK (order_id IS NULL OR char_length(order_id) BETWEEN 1 AND 128);

CREATE UNIQUE INDEX conversions_order ON conversions (site_id, event_type, (COALESCE(custom_event_name, '')), order_id)
  WHERE order_id IS NOT NULL;

-- The platforms' event id of an order's conversion, the same for every report of the order (and
-- so deduplicated by the platform too): derived from the site, the event type and name, and the
-- order, never from the conversion's own id. NULL without an order (the send then takes `cnv_<id>`).
CREATE FUNCTION capigram_order_event_id(site uuid, event_type text, custom_event_name text, order_id text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN order_id IS NULL THEN NULL ELSE
    'ord_' || left(encode(sha256(convert_to(
      site::text || chr(10) || event_type || chr(10) || COALESCE(custom_event_name, '') || chr(10) || order_id, 'UTF8')), 'hex'), 40)
  END
$$;
