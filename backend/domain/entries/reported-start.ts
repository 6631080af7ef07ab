import { withTx } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { tieEntry } from './tie.js';

/**
 * A start reported by the operator's own bot backend (`POST /entries/start`): a bot has one
 * webhook, and most funnel bots already have one elsewhere. Same effect as `/start <payload>`
 * reaching Capigram's webhook, but the bot's answer is the operator's to send. The API key's
 * account (and site, for a site-scoped key) must own the payload's entry; any other payload is
 * as unknown as a made-up one.
 */
export async function reportStart(
  deps: Pick<Deps, 'pool' | 'now' | 'log' | 'local'>,
  caller: { accountId: string; siteId: string | null },
  q: { payload: string; telegramUserId: number },
): Promise<{ attributed: boolean; conversionId?: string }> {
  const now = deps.now();
  const tie = await withTx(deps.pool, (tx) =>
    tieEntry(tx, {
      payload: q.payload,
      telegramUserId: q.telegramUserId,
      scope: { accountId: caller.accountId, siteId: caller.siteId ?? undefined },
      through: 'api',
      now,
    }),
  );
  if (tie.conversionId !== null) deps.local.waker.wake();
  deps.log.info(
    { entryId: tie.entryId, attributed: tie.attributed, reason: tie.reason },
    'bot start reported through the API',
  );
  return {
    attributed: tie.attributed,
    ...(tie.conversionId !== null ? { conversionId: tie.conversionId } : {}),
  };
}
