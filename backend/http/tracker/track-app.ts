import type { Hono } from 'hono';
import { trackAppBodySchema } from '../../../shared/tracker-wire.js';
import { appOpened } from '../../domain/entries/app-open.js';
import { readJson } from '../json.js';
import type { KeylessEnv } from './env.js';
import type { TrackerSurface } from './surface.js';

/**
 * `POST /backend/track/app`: a Mini App reports its launch. It may be served from any origin, and
 * its initData is its own credential, so any origin may post it (the preflight is in index.ts).
 */
export function registerTrackApp(keyless: Hono<KeylessEnv>, s: TrackerSurface): void {
  keyless.post('/backend/track/app', async (c) => {
    const origin = c.req.header('origin');
    if (origin !== undefined) c.set('corsOrigin', origin);
    const body = await readJson(c, trackAppBodySchema);
    const { attributed } = await appOpened(s.deps, body.initData);
    return c.json({ attributed });
  });
}
