-- Erasure on request and retention of raw identifiers (docs/data-lifecycle.md).

-- Who erased a person's data, where, when and how much: never the person's identifiers. `actor`
-- names the API key, the CLI or the dashboard.
CREATE TABLE erasures (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id   uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  site_id      uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  actor        text NOT NULL,
  erased_at    timestamptz NOT NULL DEFAULT now(),
  leads        integer NOT NULL,
  visits       integer NOT NULL,
  conversions  integer NOT NULL,
  memberships  integer NOT NULL,
  invitations  integer NOT NULL,
  sends_cancelled integer NOT NULL
);
CREATE INDEX erasures_account ON erasures (account_id, erased_at DESC);

-- An erased person's rows keep counting (reports, distinct users) under a stand-in Telegram user
-- id: the negative of a number drawn here, one per erasure. Telegram ids are positive, so a stand-in
-- never matches a real user, and nothing links it back to the person.
CREATE SEQUENCE erased_people;

-- Retention walks visits (and conversions) by age in small windows. A BRIN index costs the insert
-- path next to nothing (rows arrive in time order), where a B-tree on the time would add a hot
-- right-most page to every track/init.
-- Clearing a row's raw identifiers makes it much smaller, but its new version still needs room on
-- its page to stay there (a HOT update: no index entry written, the row does not move). Rows that
-- moved would land on the newest pages with an old time and widen the BRIN ranges there, which
-- every later batch then reads. Measured with `npm run bench -- retention` on 1 million expired
-- visits written at fillfactor 100 (on a shared two-core machine under a load of 12): 4,326 of
-- 645,357 updates HOT, 600 to 850 rows a second and slowing.
-- Pages written from now on keep the room.
ALTER TABLE visits SET (fillfactor = 70);
ALTER TABLE conversions SET (fillfactor = 80);

CREATE INDEX visits_created_brin ON visits USING brin (created_at) WITH (pages_per_range = 16);
CREATE INDEX conversions_received_brin ON conversions USING brin (received_at) WITH (pages_per_range = 16);

-- How far each retention walk has gone: everything older than `done_before` is scrubbed. Written
-- in the transaction of each batch, so a restart resumes where the last committed batch ended.
CREATE TABLE retention_progress (
  target       text PRIMARY KEY,
  done_before  timestamptz NOT NULL
);
