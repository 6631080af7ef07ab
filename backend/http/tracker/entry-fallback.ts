import type { Context } from 'hono';
import type { Deps } from '../../deps.js';
import { entryFallbackUrl } from '../../domain/entries/click.js';
import { ApiError } from '../../errors.js';
import type { KeylessEnv } from './env.js';
import { isBrowserNavigation } from './navigation-fallback.js';
import { redirect } from './responses.js';

/**
 * A browser that followed an entry link is sent on to the bot itself (unattributed) when the
 * click cannot be answered, as an invite click is sent to the channel: never an error page.
 * Only when the site and the entry are known; anything else, and any non-navigation, gets the
 * error.
 */
export async function entryNavigationFallback(
  c: Context<KeylessEnv>,
  deps: Pick<Deps, 'pool' | 'log'>,
  err: unknown,
  siteId: string | undefined,
  entryId: string | undefined,
): Promise<Response> {
  if (!isBrowserNavigation(c) || siteId === undefined) throw err;
  const url = await entryFallbackUrl(deps.pool, siteId, entryId);
  if (url === null) throw err;
  deps.log.info(
    { siteId, err: err instanceof ApiError ? err.code : String(err) },
    'entry click answered with the bot itself',
  );
  return redirect(c, url);
}
