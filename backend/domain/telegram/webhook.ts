import { createHash, randomBytes } from 'node:crypto';
import { secretMatchesHash } from '../../crypto/api-keys.js';
import { withTx } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import type { Logger } from '../../log.js';
import { ApiError } from '../../errors.js';
import { confirmWebhookSecret, findBot } from '../bot-api/bot-state.js';
import { handleMyChatMember } from './bot-status.js';
import type { UpdateContext, UpdateOutcome } from './context.js';
import { handleJoinRequest } from './join-requests.js';
import { handlePrivateMessage } from './messages.js';
import { handleChatMember } from './joins.js';
import { enqueueForward } from './forwards.js';
import { claimUpdate } from './queries.js';
import { followChatMigration } from '../bot-api/migration.js';
import { parseUpdate, type BotPayment, type ParsedUpdate } from './updates.js';

/**
 * The Telegram webhook's domain: who may post, and what an update does. Everything an update
 * causes happens in one transaction together with its de-duplication record, so a resent update
 * (Telegram resends on any error or timeout, for up to a day) is handled exactly once.
 */

export interface WebhookBot {
  id: string;
  telegramBotId: number;
  /** Whether the bot's updates are forwarded to the operator's backend (`forwards.ts`). */
  forwards?: boolean;
}

/** Telegram's secret tokens are 1–256 characters of A–Z, a–z, 0–9, _ and -. */
const SECRET_RE = /^[A-Za-z0-9_-]{1,256}$/;
// Compared against when the bot does not exist, so an unknown bot costs the same as a wrong secret.
const DECOY_HASH = createHash('sha256').update(randomBytes(32)).digest();

/**
 * The bot a webhook call is for, if the secret token matches: the current one, or the one before
 * it within 10 minutes of a change (updates in flight during `bot webhook`) and for as long as
 * the change is unconfirmed (a setWebhook whose answer was lost). 401 alike for unknown bots and
 * bad secrets.
 */
export async function authenticateWebhook(
  deps: Pick<Deps, 'pool'>,
  botId: string,
  secret: string | undefined,
): Promise<WebhookBot> {
  const bot = await findBot(deps.pool, botId);
  const presented = secret !== undefined && SECRET_RE.test(secret) ? secret : '';
  // Both compared every time, so the answer's timing says nothing about which one matched.
  const current = secretMatchesHash(presented, bot?.webhook_secret_hash ?? DECOY_HASH);
  const previous = secretMatchesHash(presented, bot?.previous_webhook_secret_hash ?? DECOY_HASH);
  if (!bot || !(current || previous) || presented === '')
    throw new ApiError('UNAUTHORIZED', 'missing or invalid X-Telegram-Bot-Api-Secret-Token');
  if (current && !bot.webhook_secret_confirmed) await confirmWebhookSecret(deps.pool, bot.id);
  return { id: bot.id, telegramBotId: bot.telegram_bot_id, forwards: bot.forward_url !== null };
}

/** Records a bot's `successful_payment` as the payer's Purchase; null when nothing was recorded. */
export type PaymentRecorder = (bot: WebhookBot, payment: BotPayment, log: Logger) => Promise<UpdateOutcome>;

/** Handles one webhook body. Never throws for anything a caller sent; only database failures escape. */
export async function handleWebhookUpdate(
  deps: Pick<Deps, 'pool' | 'log' | 'now' | 'metrics' | 'local' | 'box' | 'config'>,
  bot: WebhookBot,
  body: string,
  /** What a payment becomes: a business event (`conversions/telegram-payments.ts`), given by the caller so that what Telegram tells stays below the conversions it leads to. */
  recordPayment: PaymentRecorder,
): Promise<UpdateOutcome> {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    raw = undefined;
  }
  const update =
    raw === undefined
      ? ({ kind: 'ignored', updateId: null, reason: 'body is not JSON' } as const)
      : parseUpdate(raw);
  const log = deps.log.child({ botId: bot.id, updateId: update.updateId });
  if (update.kind === 'ignored') {
    // Answered 200 all the same: an error would only make Telegram resend it for a day.
    // A bot whose backend is elsewhere still gets it: Capigram ignoring an update (a message, a
    // callback) says nothing about whether the operator's backend wants it.
    if (bot.forwards && update.updateId !== null) {
      const updateId = update.updateId;
      await withTx(deps.pool, async (tx) => {
        if (await claimUpdate(tx, bot.id, updateId, 'forward_only'))
          await enqueueForward(tx, deps.box, bot.id, updateId, body, raw);
      });
    } else if ('routine' in update) {
      log.debug({ reason: update.reason }, 'telegram update ignored');
    } else {
      log.warn({ reason: update.reason }, 'telegram update ignored');
    }
    return 'ignored';
  }
  // A payment runs as a business event in its own lead-locked transaction, before the update is
  // claimed: its charge id is its order id, so a resend finds the same conversion (payments.ts).
  const paid = update.kind === 'payment' ? await recordPayment(bot, update.body, log) : null;
  const outcome = await withTx(deps.pool, async (tx): Promise<UpdateOutcome> => {
    if (!(await claimUpdate(tx, bot.id, update.updateId, update.kind))) return paid ?? 'duplicate';
    if (paid !== null) {
      if (bot.forwards) await enqueueForward(tx, deps.box, bot.id, update.updateId, body, raw);
      return paid;
    }
    const ctx: UpdateContext = {
      tx,
      bot,
      now: deps.now(),
      log,
      attributionWindowDays: deps.config.ATTRIBUTION_WINDOW_DAYS,
      joinGateWaitMs: deps.config.JOIN_GATE_WAIT_MS,
    };
    const handled = await handleParsed(ctx, update);
    // After Capigram's own handling, in its transaction: forwarded exactly when it was handled.
    if (bot.forwards) await enqueueForward(tx, deps.box, bot.id, update.updateId, body, raw);
    return handled;
  });
  if (outcome === 'unknown_chat') noteUnknownChat(deps, bot.id, update.kind, chatOf(update), log);
  // An attributed join committed its conversion's sends: wake the delivery worker for them.
  if (outcome === 'attributed_join' || outcome === 'entry_start') deps.local.waker.wake();
  log.debug({ kind: update.kind, outcome }, 'telegram update handled');
  return outcome;
}

async function handleParsed(
  ctx: UpdateContext,
  update: Exclude<ParsedUpdate, { kind: 'ignored' }>,
): Promise<UpdateOutcome> {
  const { tx, bot, log } = ctx;
  switch (update.kind) {
    case 'chat_member':
      return handleChatMember(ctx, update.body);
    case 'chat_join_request':
      return handleJoinRequest(ctx, update.body);
    case 'my_chat_member':
      return handleMyChatMember(ctx, update.body);
    case 'private_message':
      return handlePrivateMessage(ctx, update.body, update.updateId);
    case 'payment':
      return 'ignored';
    case 'chat_migrated':
      return (await followChatMigration(tx, log, { botId: bot.id, ...update.body })).length > 0
        ? 'chat_migrated'
        : 'ignored';
  }
}

function chatOf(update: ParsedUpdate): number | null {
  switch (update.kind) {
    case 'chat_member':
    case 'my_chat_member':
    case 'chat_join_request':
      return update.body.chat.id;
    default:
      return null;
  }
}

/** Bounds the memory of chats already warned about; past it, a chat may be warned about again. */
const MAX_WARNED_CHATS = 10_000;

/**
 * An update from a chat none of the bot's channels is in: counted, and logged at warn once per
 * (bot, chat) and process. A stream of them usually means a channel's chat id changed (a basic
 * group upgraded to a supergroup) or a channel was added under the wrong id.
 */
function noteUnknownChat(
  deps: Pick<Deps, 'metrics' | 'local'>,
  botId: string,
  kind: string,
  chatId: number | null,
  log: Deps['log'],
): void {
  deps.metrics.telegramUnknownChatUpdates.inc({ kind });
  const warnedChats = deps.local.warnedChats;
  const key = `${botId}:${chatId}`;
  if (warnedChats.has(key)) return;
  if (warnedChats.size >= MAX_WARNED_CHATS) warnedChats.clear();
  warnedChats.add(key);
  log.warn(
    { chatId, kind },
    'telegram update from a chat no channel of this bot is in (logged once per chat)',
  );
}
