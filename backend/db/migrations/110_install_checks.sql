-- Install checks: whether a site's tracker is installed and its visits arrive, and which page
-- domains its requests were refused for. Kept apart from `sites`, so that recording them never
-- updates the site row the tracker reads on every visit; both are written at most about once a
-- minute per site (or per refused host) and process, never once per visit.

-- The first and the latest track/init visit seen per site (the latest to within a minute).
CREATE TABLE site_visits_seen (
  site_id         uuid PRIMARY KEY REFERENCES sites(id) ON DELETE CASCADE,
  first_visit_at  timestamptz NOT NULL,
  last_visit_at   timestamptz NOT NULL
);

INSERT INTO site_visits_seen (site_id, first_visit_at, last_visit_at)
SELECT site_id, min(created_at), max(created_at) FROM visits WHERE kind = 'pageview' GROUP BY site_id;

-- Hosts the tracker refused for a site (a page on a domain the site does not list): at most 20
-- hosts per site are kept, so a flood of made-up Origins cannot grow the table.
CREATE TABLE site_refused_hosts (
  site_id   uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  host      text NOT NULL CHECK (length(host) BETWEEN 1 AND 253),
  refused   bigint NOT NULL CHECK (refused > 0),
  first_at  timestamptz NOT NULL,
  last_at   timestamptz NOT NULL,
  PRIMARY KEY (site_id, host)
);
