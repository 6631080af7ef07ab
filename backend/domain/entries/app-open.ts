import type { SecretBox } from '../../crypto/secret-box.js';
import { withTx, type Pool } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError } from '../../errors.js';
import { parseInitData, readSignedInitData, signedBy } from './init-data.js';
import { signedByTelegram } from './init-data-signature.js';
import { isPayload } from './payload.js';
import { tieEntry } from './tie.js';

/**
 * A Mini App opened from an entry link (`t.me/<bot>/<app>?startapp=<payload>`) reports its
 * `initData` (`POST track/app`). No API key: Telegram's signature is the credential. The bot is
 * the one whose entry handed out `start_param`'s payload; initData without a payload of ours is
 * checked against the bots that have Mini App entries (at most `MAX_APP_BOTS`), so a Mini App
 * opened from its menu button is answered 200 too. A valid, fresh initData ties the payload's
 * visit to the user exactly as `/start <payload>` does.
 */
const MAX_APP_BOTS = 100;

const invalid = (why: string) => new ApiError('INIT_DATA_INVALID', why);

export async function appOpened(
  deps: Pick<Deps, 'pool' | 'box' | 'now' | 'log' | 'local' | 'config'>,
  initData: string,
): Promise<{ attributed: boolean; siteId: string | null }> {
  const fields = parseInitData(initData);
  if (fields === null) throw invalid('initData is not Telegram.WebApp.initData (no hash)');
  const startParam = fields.get('start_param');
  const payload = isPayload(startParam) ? startParam : null;
  const bot = await signingBot(deps.pool, deps.box, fields, payload);
  if (bot === null)
    throw invalid("initData is not signed by the bot of this entry (forged, altered, or another bot's)");
  // Telegram's own Ed25519 signature, where the app sent one (older apps send only `hash`).
  if (
    fields.has('signature') &&
    !signedByTelegram(fields, bot.telegramId, deps.config.TELEGRAM_INIT_DATA_KEY)
  )
    throw invalid("initData's signature is not Telegram's");
  const read = readSignedInitData(fields, deps.now());
  if (!read.ok) throw invalid(`initData ${read.reason}`);
  if (payload === null) return { attributed: false, siteId: null };

  const tie = await withTx(deps.pool, (tx) =>
    tieEntry(tx, {
      payload,
      telegramUserId: read.data.userId,
      scope: { botId: bot.id },
      through: 'app',
      now: deps.now(),
    }),
  );
  if (tie.conversionId !== null) deps.local.waker.wake();
  deps.log.info(
    { botId: bot.id, entryId: tie.entryId, attributed: tie.attributed, reason: tie.reason },
    'mini app opened',
  );
  return { attributed: tie.attributed, siteId: bot.siteId };
}

async function signingBot(
  db: Pool,
  box: SecretBox,
  fields: Map<string, string>,
  payload: string | null,
): Promise<{ id: string; siteId: string | null; telegramId: string } | null> {
  const byPayload =
    payload === null
      ? []
      : (
          await db.query<{ id: string; token_enc: string; site_id: string }>(
            `SELECT b.id, b.token_enc, k.site_id FROM entry_clicks k JOIN entries e ON e.id = k.entry_id JOIN bots b ON b.id = e.bot_id AND b.removed_at IS NULL
       WHERE k.payload = $1`,
            [payload],
          )
        ).rows;
  const candidates =
    byPayload.length > 0
      ? byPayload
      : (
          await db.query<{ id: string; token_enc: string; site_id: null }>(
            `SELECT DISTINCT b.id, b.token_enc, NULL::uuid AS site_id FROM entries e JOIN bots b ON b.id = e.bot_id AND b.removed_at IS NULL
       WHERE e.kind = 'app' AND e.active LIMIT ${MAX_APP_BOTS}`,
          )
        ).rows;
  for (const c of candidates) {
    const token = box.open(c.token_enc);
    // A bot token is `<bot id>:<secret>`.
    if (signedBy(fields, token))
      return { id: c.id, siteId: c.site_id, telegramId: token.split(':')[0] ?? '' };
  }
  return null;
}
