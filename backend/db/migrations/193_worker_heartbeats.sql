-- Each job runner's heartbeat, by the ids graphile-worker locks its jobs under. Jobs locked by an
-- id that stopped beating (a worker killed, its machine gone) are released by the other runners'
-- sweep instead of waiting out graphile-worker's four-hour lock timeout (worker/heartbeat.ts).
CREATE TABLE worker_heartbeats (
  worker_id text PRIMARY KEY,
  beat_at timestamptz NOT NULL DEFAULT now()
);
