-- A send a worker has claimed and is putting to its platform right now. `next_attempt_at` alone
-- cannot tell it from a send waiting for its next retry (both are pending and due later), and a
-- business event may update a matching pending conversion only while none of its sends is on its
-- way: the payload in flight carries the values read when it was claimed. Only meaningful while
-- the lease (`next_attempt_at`) lasts: a crashed worker's flag goes stale with its lease.
ALTER TABLE sends ADD COLUMN in_flight boolean NOT NULL DEFAULT false;
