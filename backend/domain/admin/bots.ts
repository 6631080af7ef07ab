import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { hashApiKey } from '../../crypto/api-keys.js';
import { withTx, type Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError, validationError } from '../../errors.js';
import { TelegramError, allowedUpdatesFor, createTelegramClient } from '../../telegram/client.js';
import { findBot, ROTATE_WEBHOOK_SECRET, unconfirmWebhookSecret, type BotRow } from '../bot-api/bot-state.js';
import { requireAccount } from './accounts.js';
import { BotForwardingInput, checkForwardUrl, forwardingColumns } from './bot-forwarding.js';
import { BotToken, Uuid } from './schemas.js';

export const AddBotInput = z
  .object({
    accountId: Uuid,
    token: BotToken,
    webhook: z.boolean().default(true),
  })
  .and(BotForwardingInput);

function webhookUrlFor(publicUrl: string, botId: string): string {
  return `${publicUrl}/backend/telegram/${botId}`;
}

/**
 * Registers a bot: the token is checked with getMe, the webhook set with a fresh secret token
 * (unless disabled), and the bot stored with its token encrypted and only the secret's hash.
 *
 * Telegram keeps one webhook per bot, so a setWebhook for a bot that then is not stored re-points
 * a live bot to a secret nobody has. The row is therefore inserted first, in a transaction that
 * commits only once setWebhook succeeded: the unique (account, bot) constraint refuses a
 * duplicate before Telegram is touched beyond the read-only getMe, and of two concurrent adds the
 * second waits on the first's uncommitted row, then is refused without calling setWebhook. When
 * Telegram refuses the webhook the insert is rolled back and nothing is stored.
 */
export async function addBot(
  deps: Pick<Deps, 'pool' | 'box' | 'config'>,
  input: z.input<typeof AddBotInput>,
): Promise<{ botId: string; webhookUrl: string }> {
  const parsed = AddBotInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'bot');
  const b = parsed.data;
  await checkForwardUrl(deps.config, b.forwardUrl);
  await requireAccount(deps.pool, b.accountId);
  const tg = createTelegramClient({ baseUrl: deps.config.TELEGRAM_API_URL, token: b.token });
  const me = await tg.getMe().catch((err: unknown) => {
    throw refusal(err, 'the token could not be checked with Telegram (getMe)');
  });
  if (me.is_bot === false) throw new ApiError('VALIDATION_FAILED', 'the token does not belong to a bot');

  const botId = randomUUID();
  const secret = randomBytes(32).toString('base64url');
  const forward = forwardingColumns(deps.box, b);
  const webhookUrl = webhookUrlFor(deps.config.PUBLIC_URL, botId);
  try {
    await withTx(deps.pool, async (tx) => {
      // Telegram sends a bot's updates to one webhook only: a bot shared by two accounts would
      // leave one of them deaf, so it belongs to one account. The lock serialises concurrent adds
      // of one bot (the unique key is per account, so it cannot decide this by itself).
      await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended('capigram:bot:' || $1::text, 0))`, [
        me.id,
      ]);
      const taken = await tx.query(
        'SELECT 1 FROM bots WHERE telegram_bot_id = $1 AND account_id <> $2 AND removed_at IS NULL LIMIT 1',
        [me.id, b.accountId],
      );
      if (taken.rowCount !== 0) {
        throw new ApiError(
          'VALIDATION_FAILED',
          `bot @${me.username ?? me.id} is already registered by another account; Telegram delivers a bot's updates to one webhook only, so each account needs its own bot`,
        );
      }
      await tx.query(
        `INSERT INTO bots (id, account_id, telegram_bot_id, username, token_enc, webhook_secret_hash, webhook_url, webhook_set_at, forward_url, forward_secret_enc, webhook_allowed_updates)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          botId,
          b.accountId,
          me.id,
          me.username ?? null,
          deps.box.seal(b.token),
          hashApiKey(secret),
          webhookUrl,
          b.webhook ? new Date() : null,
          forward.url,
          forward.secretEnc,
          b.webhook ? allowedUpdatesFor(forward.url !== null) : null,
        ],
      );
      if (!b.webhook) return;
      await tg
        .setWebhook({
          url: webhookUrl,
          secret_token: secret,
          allowed_updates: allowedUpdatesFor(forward.url !== null),
          max_connections: 40,
        })
        .catch((err: unknown) => {
          throw refusal(
            err,
            `Telegram refused the webhook ${webhookUrl} (it needs a public HTTPS PUBLIC_URL; use --no-webhook to skip)`,
          );
        });
    });
  } catch (err) {
    if ((err as { code?: string }).code === '23505')
      throw new ApiError(
        'VALIDATION_FAILED',
        `bot @${me.username ?? me.id} is already registered for this account`,
      );
    throw err;
  }
  return { botId, webhookUrl };
}

function refusal(err: unknown, what: string): ApiError {
  if (err instanceof TelegramError) {
    const why =
      err.kind === 'unauthorized'
        ? 'invalid token'
        : err.kind === 'network'
          ? 'Telegram unreachable'
          : err.message;
    return new ApiError('VALIDATION_FAILED', `${what}: ${why}`);
  }
  return new ApiError('VALIDATION_FAILED', `${what}: ${String(err)}`);
}

/** A bot in use, or NOT_FOUND naming it. */
async function requireBot(db: Queryable, botId: string): Promise<BotRow> {
  if (!Uuid.safeParse(botId).success)
    throw new ApiError('VALIDATION_FAILED', `bot "${botId}" is not a valid id`);
  const bot = await findBot(db, botId);
  if (!bot) throw new ApiError('NOT_FOUND', `bot ${botId} does not exist (or was removed)`);
  return bot;
}

export interface BotListItem {
  botId: string;
  accountId: string;
  telegramBotId: number;
  username: string | null;
  webhookUrl: string | null;
  /** When `bot add` or `bot webhook` last set the webhook with Telegram; null: never (`--no-webhook`). */
  webhookSetAt: string | null;
  /** Active channels that see their joins through this bot. */
  channels: number;
  /** Where the bot's updates are forwarded after Capigram handled them; null: nowhere. */
  forwardUrl: string | null;
}

/** The bots in use, of one account or of all. Never the token. */
export async function listBots(db: Queryable, accountId?: string): Promise<{ bots: BotListItem[] }> {
  if (accountId !== undefined) await requireAccount(db, accountId);
  const { rows } = await db.query<{
    id: string;
    account_id: string;
    telegram_bot_id: number;
    username: string | null;
    webhook_url: string | null;
    webhook_set_at: Date | null;
    channels: number;
    forward_url: string | null;
  }>(
    `SELECT b.id, b.account_id, b.telegram_bot_id, b.username, b.webhook_url, b.webhook_set_at, b.forward_url,
       (SELECT count(*)::int FROM channels c WHERE c.bot_id = b.id AND c.active) AS channels
     FROM bots b WHERE b.removed_at IS NULL AND ($1::uuid IS NULL OR b.account_id = $1) ORDER BY b.created_at, b.id`,
    [accountId ?? null],
  );
  return {
    bots: rows.map((r) => ({
      botId: r.id,
      accountId: r.account_id,
      telegramBotId: r.telegram_bot_id,
      username: r.username,
      webhookUrl: r.webhook_url,
      webhookSetAt: r.webhook_set_at?.toISOString() ?? null,
      channels: r.channels,
      forwardUrl: r.forward_url,
    })),
  };
}

/**
 * Sets (or sets again) a bot's webhook: a bot added with `--no-webhook`, a PUBLIC_URL that
 * changed, a webhook someone else re-pointed. A fresh secret each time, stored in the same
 * transaction that calls setWebhook and committed only once Telegram took it, so the stored
 * secret is always the one Telegram sends (for the moment between the two, Telegram's calls
 * with the new secret are refused and it sends them again). The bot's row lock serialises two
 * concurrent calls. The previous secret stays accepted for 10 minutes (`authenticateWebhook`),
 * so updates Telegram had in flight are not turned away. When setWebhook's answer is lost (a
 * timeout, a reset), Telegram may or may not have taken the new secret: getWebhookInfo tells
 * whether it holds this URL; if it does not, nothing changed and the call fails; if it does (or
 * cannot be asked), both secrets stay accepted until an update shows the new one.
 */
export async function setBotWebhook(
  deps: Pick<Deps, 'pool' | 'box' | 'config'>,
  botId: string,
): Promise<{ botId: string; webhookUrl: string; warning?: string }> {
  const bot = await requireBot(deps.pool, botId);
  const tg = createTelegramClient({
    baseUrl: deps.config.TELEGRAM_API_URL,
    token: deps.box.open(bot.token_enc),
  });
  const secret = randomBytes(32).toString('base64url');
  const webhookUrl = webhookUrlFor(deps.config.PUBLIC_URL, bot.id);
  let warning: string | undefined;
  await withTx(deps.pool, async (tx) => {
    const { rowCount } = await tx.query(
      `UPDATE bots SET ${ROTATE_WEBHOOK_SECRET}, webhook_url = $3, webhook_set_at = now(), webhook_allowed_updates = $4 WHERE id = $1 AND removed_at IS NULL`,
      [bot.id, hashApiKey(secret), webhookUrl, allowedUpdatesFor(bot.forward_url !== null)],
    );
    if (!rowCount) throw new ApiError('NOT_FOUND', `bot ${botId} was removed meanwhile`);
    try {
      await tg.setWebhook({
        url: webhookUrl,
        secret_token: secret,
        allowed_updates: allowedUpdatesFor(bot.forward_url !== null),
        max_connections: 40,
      });
    } catch (err) {
      const refused = refusal(
        err,
        `Telegram refused the webhook ${webhookUrl} (it needs a public HTTPS PUBLIC_URL)`,
      );
      // A refusal (or a 5xx) changed nothing at Telegram: roll back to the secret it still sends.
      if (!(err instanceof TelegramError && err.kind === 'network' && err.errorCode === undefined))
        throw refused;
      const info = await tg.getWebhookInfo().catch(() => null);
      if (info !== null && info.url !== webhookUrl) throw refused;
      await unconfirmWebhookSecret(tx, bot.id);
      warning = `Telegram's answer to setWebhook was lost; ${info === null ? 'getWebhookInfo did not answer either' : 'getWebhookInfo shows the webhook set'}: the old and the new secret are both accepted until an update arrives with the new one`;
    }
  });
  return { botId: bot.id, webhookUrl, ...(warning === undefined ? {} : { warning }) };
}

/**
 * Stops using a bot: Telegram's webhook is deleted (so Telegram stops sending its updates here),
 * its channels are deactivated (and stop being their sites' default), and the bot is marked
 * removed. Nothing is deleted: the channels'
 * visits and conversions stay for reports and the lead API, and the bot can be added again.
 * If Telegram cannot be told (token revoked, Telegram unreachable), the bot is removed all the
 * same and the answer says so: updates Telegram still sends are refused.
 */
export async function removeBot(
  deps: Pick<Deps, 'pool' | 'box' | 'config'>,
  botId: string,
): Promise<{
  botId: string;
  removed: true;
  channelsDeactivated: number;
  webhookDeleted: boolean;
  warning?: string;
}> {
  const bot = await requireBot(deps.pool, botId);
  const tg = createTelegramClient({
    baseUrl: deps.config.TELEGRAM_API_URL,
    token: deps.box.open(bot.token_enc),
  });
  let warning: string | undefined;
  await tg.deleteWebhook().catch((err: unknown) => {
    warning = `${refusal(err, 'Telegram could not be told to stop sending updates (deleteWebhook)').message}; updates it still sends are refused`;
  });
  const channelsDeactivated = await withTx(deps.pool, async (tx) => {
    const { rowCount } = await tx.query(
      'UPDATE bots SET removed_at = now(), webhook_set_at = NULL WHERE id = $1 AND removed_at IS NULL',
      [bot.id],
    );
    if (!rowCount) throw new ApiError('NOT_FOUND', `bot ${botId} was removed meanwhile`);
    const channels = await tx.query('UPDATE channels SET active = false WHERE bot_id = $1 AND active', [
      bot.id,
    ]);
    // A site whose default channel was one of them names none until the operator picks one (or
    // adds a channel, which becomes the default as a site's first does): never a channel that
    // hands out no links.
    await tx.query(
      'UPDATE sites SET default_channel_id = NULL WHERE default_channel_id IN (SELECT id FROM channels WHERE bot_id = $1)',
      [bot.id],
    );
    return channels.rowCount ?? 0;
  });
  return {
    botId: bot.id,
    removed: true,
    channelsDeactivated,
    webhookDeleted: warning === undefined,
    ...(warning === undefined ? {} : { warning }),
  };
}
