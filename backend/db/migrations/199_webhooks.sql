-- Outbound webhooks: the operator's own systems (a CRM, billing, a warehouse) hear about
-- conversions, their delivery to the platforms, joins and leaves as they happen. The secret signs
-- each POST (it is needed in clear to sign, so it is kept encrypted, not hashed).
CREATE TABLE webhooks (
  id          uuid PRIMARY KEY DEFAULT capigram_uuid_v7(),
  site_id     uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  url         text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
  secret_enc  text NOT NULL,
  events      text[] NOT NULL CHECK (cardinality(events) > 0 AND events <@ ARRAY['conversion.created','conversion.sent','conversion.failed','join','leave']),
  created_at  timestamptz NOT NULL DEFAULT now(),
  removed_at  timestamptz
);
-- What the triggers below probe for every fact: a site without webhooks costs one look in here.
CREATE INDEX webhooks_site ON webhooks (site_id) WHERE removed_at IS NULL;

-- The webhooks' outbox and delivery log: one row per (webhook, event), written by the triggers in
-- the transaction of the fact it reports, so an event exists exactly when its fact was committed.
-- Rows of one (webhook, Telegram user) go out one at a time in id order: a lead's events never
-- overtake each other. `data` is the event's object as posted; erasure deletes a lead's rows.
CREATE TABLE webhook_events (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  webhook_id        uuid NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  -- The event's id for the receiver's own de-duplication (at least once: a retry repeats it).
  event_id          uuid NOT NULL DEFAULT capigram_uuid_v7(),
  type              text NOT NULL,
  telegram_user_id  bigint NOT NULL,
  data              jsonb NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  attempts          integer NOT NULL DEFAULT 0,
  last_status       integer,
  last_error        text,
  next_attempt_at   timestamptz,
  delivered_at      timestamptz,
  -- Given up: refused for a day.
  dropped_at        timestamptz
);
CREATE INDEX webhook_events_pending ON webhook_events (webhook_id, telegram_user_id, id)
  WHERE delivered_at IS NULL AND dropped_at IS NULL;
CREATE INDEX webhook_events_log ON webhook_events (webhook_id, id DESC);
CREATE INDEX webhook_events_user ON webhook_events (telegram_user_id);
CREATE INDEX webhook_events_age ON webhook_events (created_at);

-- Queues the (webhook, user)'s delivery job unless one is already waiting (even out a backoff):
-- the same rule as the update forwards' wake-up (domain/telegram/forwards.ts).
CREATE FUNCTION capigram_webhook_wake(p_webhook uuid, p_user bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  k text := 'capigram_webhook_deliver:' || p_webhook || ':' || p_user;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM graphile_worker.jobs WHERE key = k AND locked_at IS NULL AND attempts < max_attempts) THEN
    PERFORM graphile_worker.add_job('capigram_webhook_deliver',
      json_build_object('webhookId', p_webhook, 'telegramUserId', p_user::text),
      job_key := k, job_key_mode := 'replace', max_attempts := 25);
  END IF;
  RETURN 1;
END $$;

-- The hooks into the facts. They are triggers, not code on the intake and delivery paths: no
-- extra round trip, and for a site without webhooks the cost is one probe of webhooks_site per
-- statement (inserts, through transition tables) or per status change (conversions' capi_status,
-- filtered by the trigger's WHEN before any function runs).
CREATE FUNCTION capigram_webhooks_conversion_created() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  woken integer;
BEGIN
  WITH ins AS (
    INSERT INTO webhook_events (webhook_id, type, telegram_user_id, data)
    SELECT w.id, 'conversion.created', n.telegram_user_id, capigram_webhook_conversion_data(n)
    FROM new_rows n JOIN webhooks w ON w.site_id = n.site_id AND w.removed_at IS NULL
    WHERE 'conversion.created' = ANY (w.events)
    ORDER BY n.id
    RETURNING webhook_id, telegram_user_id
  )
  SELECT sum(capigram_webhook_wake(k.webhook_id, k.telegram_user_id)) INTO woken
  FROM (SELECT DISTINCT webhook_id, telegram_user_id FROM ins) k;
  RETURN NULL;
END $$;

CREATE FUNCTION capigram_webhook_conversion_data(c conversions) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'conversionId', c.id, 'siteId', c.site_id, 'channelId', c.channel_id, 'telegramUserId', c.telegram_user_id::text,
    'eventType', c.event_type, 'customEventName', c.custom_event_name, 'value', c.value, 'currency', c.currency,
    'orderId', c.order_id, 'source', c.source, 'eventTime', c.event_time, 'capiStatus', c.capi_status,
    'awaitingManualInput', c.awaiting_manual_input)
$$;

CREATE FUNCTION capigram_webhooks_conversion_status() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  t text := 'conversion.' || NEW.capi_status;
  w record;
BEGIN
  FOR w IN SELECT id FROM webhooks WHERE site_id = NEW.site_id AND removed_at IS NULL AND t = ANY (events) LOOP
    INSERT INTO webhook_events (webhook_id, type, telegram_user_id, data)
    VALUES (w.id, t, NEW.telegram_user_id, capigram_webhook_conversion_data(NEW));
    PERFORM capigram_webhook_wake(w.id, NEW.telegram_user_id);
  END LOOP;
  RETURN NULL;
END $$;

CREATE FUNCTION capigram_webhooks_membership() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  woken integer;
BEGIN
  WITH ins AS (
    INSERT INTO webhook_events (webhook_id, type, telegram_user_id, data)
    SELECT w.id, n.kind, n.telegram_user_id, jsonb_build_object(
        'siteId', ch.site_id, 'channelId', n.channel_id, 'telegramChannelId', ch.telegram_chat_id::text,
        'telegramUserId', n.telegram_user_id::text, 'attributed', n.attributed, 'visitId', n.visit_id,
        'conversionId', n.conversion_id, 'viaJoinRequest', n.via_join_request, 'occurredAt', n.occurred_at)
    FROM new_rows n
    JOIN channels ch ON ch.id = n.channel_id
    JOIN webhooks w ON w.site_id = ch.site_id AND w.removed_at IS NULL
    WHERE n.kind IN ('join', 'leave') AND n.kind = ANY (w.events)
    ORDER BY n.occurred_at, n.id
    RETURNING webhook_id, telegram_user_id
  )
  SELECT sum(capigram_webhook_wake(k.webhook_id, k.telegram_user_id)) INTO woken
  FROM (SELECT DISTINCT webhook_id, telegram_user_id FROM ins) k;
  RETURN NULL;
END $$;

CREATE TRIGGER webhooks_conversion_created AFTER INSERT ON conversions
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION capigram_webhooks_conversion_created();
CREATE TRIGGER webhooks_conversion_status AFTER UPDATE OF capi_status ON conversions
  FOR EACH ROW WHEN (NEW.capi_status IS DISTINCT FROM OLD.capi_status AND NEW.capi_status IN ('sent', 'failed'))
  EXECUTE FUNCTION capigram_webhooks_conversion_status();
CREATE TRIGGER webhooks_membership AFTER INSERT ON memberships
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION capigram_webhooks_membership();
