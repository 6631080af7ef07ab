import type { Hono } from 'hono';
import { trackEntryQuerySchema } from '../../../shared/tracker-wire.js';
import { entryClick } from '../../domain/entries/click.js';
import { registerClick } from './click.js';
import { entryNavigationFallback } from './entry-fallback.js';
import type { KeylessEnv } from './env.js';
import type { TrackerSurface } from './surface.js';

/**
 * `GET /backend/track/entry`: an entry click, like an invite click but to a bot (or its Mini App)
 * with a fresh payload.
 */
export function registerTrackEntry(keyless: Hono<KeylessEnv>, s: TrackerSurface): void {
  registerClick(keyless, s, {
    path: '/backend/track/entry',
    query: trackEntryQuerySchema,
    record: (deps, input, query) => entryClick(deps, { ...input, entryId: query.entry }),
    json: (outcome) => ({ visitId: outcome.visitId, url: outcome.url }),
    fallback: (c, err, siteId) => entryNavigationFallback(c, s.deps, err, siteId, c.req.query('entry')),
  });
}
