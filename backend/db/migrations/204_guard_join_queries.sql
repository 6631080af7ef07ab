-- Guard-bot join queries (Bot API 10.1): a chat_join_request with a query_id must be answered
-- within 10 seconds, by answerChatJoinRequestQuery or by showing a Mini App first
-- (sendChatJoinRequestWebApp). `join_gate` = 'webapp' shows Capigram's gate Mini App.
ALTER TABLE channels ADD COLUMN join_gate text NOT NULL DEFAULT 'off' CHECK (join_gate IN ('off', 'webapp'));

-- One row per query: what the channel's rule would answer, what was decided (by the rule, or by
-- the gate page with the visit it proved), and when Telegram took the answer. A query is decided
-- once (`decision` is set by whichever of the gate page and the fallback comes first).
CREATE TABLE join_request_queries (
  id                uuid PRIMARY KEY DEFAULT capigram_uuid_v7(),
  bot_id            uuid NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
  channel_id        uuid NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  query_id          text NOT NULL CHECK (length(query_id) BETWEEN 1 AND 256),
  telegram_user_id  bigint NOT NULL,
  received_at       timestamptz NOT NULL,
  answer_by         timestamptz NOT NULL,
  rule_answer       text NOT NULL CHECK (rule_answer IN ('approve', 'decline', 'queue')),
  gate              boolean NOT NULL DEFAULT false,
  gate_shown_at     timestamptz,
  decision          text CHECK (decision IS NULL OR decision IN ('approve', 'decline', 'queue')),
  decided_by        text CHECK (decided_by IS NULL OR decided_by IN ('rule', 'gate', 'fallback')),
  visit_id          uuid REFERENCES visits(id) ON DELETE SET NULL,
  proof             text CHECK (proof IS NULL OR proof IN ('invitation', 'entry', 'browser')),
  answered_at       timestamptz,
  answer_error      text,
  UNIQUE (bot_id, query_id)
);
CREATE INDEX join_request_queries_user ON join_request_queries (channel_id, telegram_user_id, received_at DESC);
