import { randomBytes } from 'node:crypto';
import { hashApiKey } from '../../crypto/api-keys.js';
import { withTx } from '../../db/pool.js';
import { ROTATE_WEBHOOK_SECRET, unconfirmWebhookSecret } from '../bot-api/bot-state.js';
import type { Deps } from '../../deps.js';
import {
  ALLOWED_UPDATES,
  TelegramError,
  allowedUpdatesFor,
  createTelegramClient,
} from '../../telegram/client.js';

/**
 * Bots whose webhook was set with fewer update types than Capigram now asks for (registered
 * before `message` was added for entries) are set again, at the same URL, with today's list: no
 * operator has to run `bot webhook` for an upgrade. Telegram's setWebhook replaces every setting,
 * the secret token included, and only the secret's hash is stored, so a fresh secret is set and
 * stored in one transaction that commits once Telegram took it (as `bot webhook` does). Runs when
 * a worker starts and then every few minutes, so a bot Telegram could not be told about is tried
 * again.
 */
export const UPGRADE_WEBHOOKS_TASK = 'telegram_upgrade_webhooks';

export async function upgradeWebhooks(
  deps: Pick<Deps, 'pool' | 'box' | 'config' | 'log'>,
): Promise<{ upgraded: number; failed: number }> {
  // Every list Capigram sets holds ALLOWED_UPDATES (a forwarding bot's holds every type): a bot
  // whose recorded list lacks one of them was set before it was added.
  const { rows } = await deps.pool.query<{ id: string }>(
    `SELECT id FROM bots WHERE removed_at IS NULL AND webhook_set_at IS NOT NULL AND webhook_url IS NOT NULL
       AND (webhook_allowed_updates IS NULL OR NOT webhook_allowed_updates @> $1::text[])`,
    [ALLOWED_UPDATES],
  );
  let upgraded = 0;
  let failed = 0;
  for (const { id } of rows) {
    try {
      const done = await withTx(deps.pool, async (tx) => {
        // The row lock serialises this with `bot webhook` and a second worker doing the same.
        const { rows: locked } = await tx.query<{
          token_enc: string;
          webhook_url: string;
          webhook_allowed_updates: string[] | null;
          forward_url: string | null;
        }>(
          `SELECT token_enc, webhook_url, webhook_allowed_updates, forward_url FROM bots
           WHERE id = $1 AND removed_at IS NULL AND webhook_set_at IS NOT NULL AND webhook_url IS NOT NULL FOR UPDATE`,
          [id],
        );
        const bot = locked[0];
        if (
          !bot ||
          (bot.webhook_allowed_updates !== null &&
            ALLOWED_UPDATES.every((u) => bot.webhook_allowed_updates!.includes(u)))
        )
          return false;
        const allowed = allowedUpdatesFor(bot.forward_url !== null);
        const secret = randomBytes(32).toString('base64url');
        await tx.query(
          `UPDATE bots SET ${ROTATE_WEBHOOK_SECRET}, webhook_allowed_updates = $3 WHERE id = $1`,
          [id, hashApiKey(secret), allowed],
        );
        const tg = createTelegramClient({
          baseUrl: deps.config.TELEGRAM_API_URL,
          token: deps.box.open(bot.token_enc),
          timeoutMs: 10_000,
        });
        try {
          await tg.setWebhook({
            url: bot.webhook_url,
            secret_token: secret,
            allowed_updates: allowed,
            max_connections: 40,
          });
        } catch (err) {
          // An answer lost on the way (no HTTP status): Telegram may hold the new secret, so both
          // are accepted until an update shows which; anything else changed nothing there.
          if (!(err instanceof TelegramError && err.kind === 'network' && err.errorCode === undefined))
            throw err;
          await unconfirmWebhookSecret(tx, id);
        }
        return true;
      });
      if (done) {
        upgraded++;
        deps.log.info({ botId: id }, 'webhook set again with the update types Capigram now asks for');
      }
    } catch (err) {
      failed++;
      const why = err instanceof TelegramError ? err.message : String(err);
      deps.log.warn(
        { botId: id, err: why },
        'could not set the webhook again with the new update types; will retry',
      );
    }
  }
  return { upgraded, failed };
}
