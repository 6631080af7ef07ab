-- Scheduled spend imports (docs/spend.md, "Running it").
--
-- `progress_window`: the days an interrupted import was reading; only an import of that same
-- window goes on from its `progress` page, any other starts from the first page.
-- `import_lease_token` / `import_lease_until`: the one import of the source that may run, queued,
-- running or waiting out a platform's rate limit, so that the backfill, the hourly refresh and
-- `spend sync` never read one source at the same time. A lease whose holder died ends by itself.
ALTER TABLE spend_sources
  ADD COLUMN progress_window jsonb,
  ADD COLUMN import_lease_token uuid,
  ADD COLUMN import_lease_until timestamptz;

-- The hourly refresh reads the sources still in use.
CREATE INDEX spend_sources_live ON spend_sources (site_id) WHERE removed_at IS NULL;
