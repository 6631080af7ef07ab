import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError, validationError } from '../../errors.js';
import { TelegramError, createTelegramClient } from '../../telegram/client.js';
import { botRights } from '../bot-api/member-status.js';
import { findBot, type BotRow } from '../bot-api/bot-state.js';
import { requireSite } from './sites.js';
import { Currency, EventType, TelegramChatId, Uuid } from './schemas.js';
import { JOIN_REQUEST_RULES } from '../telegram/join-request-rules.js';

const ChannelFields = z.object({
  siteId: z.string().trim().min(1),
  botId: Uuid,
  telegramChannelId: TelegramChatId,
  title: z.string().trim().min(1).max(255),
  username: z
    .string()
    .trim()
    .transform((u) => u.replace(/^@/, ''))
    .pipe(z.string().regex(/^[A-Za-z0-9_]{4,32}$/, 'must be a Telegram username'))
    .optional(),
  funnelOrder: z.coerce.number().int().min(0).max(1_000_000).default(0),
  eventType: EventType.default('Subscribe'),
  customEventName: z.string().trim().min(1).max(100).optional(),
  value: z.coerce.number().finite().min(0).max(1e12).optional(),
  currency: Currency.optional(),
  manualValue: z.boolean().default(false),
  isDefault: z.boolean().default(false),
  inviteMode: z.enum(['member_limit', 'join_request']).default('member_limit'),
  publicInviteUrl: z.string().trim().url().max(512).optional(),
  /** What becomes of join requests (`domain/telegram/join-request-rules.ts`). */
  joinRequests: z.enum(JOIN_REQUEST_RULES).default('approve-all'),
  /** Sent to each requester while the request waits; Telegram's limit for a message is 4096 characters. */
  welcomeText: z.string().trim().min(1).max(4096).optional(),
  /** How a guard bot's join queries are answered: by the rule (`off`) or after the gate Mini App (`domain/telegram/guard-queries.ts`). */
  joinGate: z.enum(['off', 'webapp']).default('off'),
  /**
   * Refuse unless Telegram confirms the chat exists and the bot may invite users there (the CLI's
   * default; `--skip-telegram-check` turns it off). Off, Telegram is asked best effort and a bot
   * promoted later is noticed through my_chat_member and the periodic rights check.
   */
  requireTelegram: z.boolean().default(false),
});

/** What `channel update --clear` can take back, by flag name. */
export const CLEARABLE = [
  'username',
  'custom-event-name',
  'value',
  'manual-value',
  'public-invite-url',
  'welcome-text',
] as const;
type Clearable = (typeof CLEARABLE)[number];
/** The fields each one clears. */
const CLEARS: Record<Clearable, readonly (keyof z.infer<typeof ChannelFields>)[]> = {
  username: ['username'],
  'custom-event-name': ['customEventName'],
  value: ['value', 'currency'],
  'manual-value': ['manualValue'],
  'public-invite-url': ['publicInviteUrl'],
  'welcome-text': ['welcomeText'],
};

export const AddChannelInput = ChannelFields.superRefine((c, ctx) => {
  if ((c.value === undefined) !== (c.currency === undefined))
    ctx.addIssue({ code: 'custom', path: ['currency'], message: '--value and --currency go together' });
  if (c.manualValue && c.eventType !== 'Purchase')
    ctx.addIssue({
      code: 'custom',
      path: ['manualValue'],
      message: '--manual-value needs --event-type Purchase',
    });
  if (c.manualValue && c.value !== undefined)
    ctx.addIssue({
      code: 'custom',
      path: ['manualValue'],
      message: '--manual-value and a fixed --value exclude each other',
    });
  if (c.eventType === 'Custom' && !c.customEventName)
    ctx.addIssue({
      code: 'custom',
      path: ['customEventName'],
      message: 'a Custom event type needs a custom event name',
    });
});
type ChannelInput = z.infer<typeof AddChannelInput>;

/** What `channel update` may change: any field of `channel add` but the site, the bot and the chat. */
export const UpdateChannelInput = ChannelFields.omit({ siteId: true, botId: true, telegramChannelId: true })
  .partial()
  .extend({
    channelId: Uuid,
    /** Settings taken back to none (a fixed value with its currency; manual values off). */
    clear: z.array(z.enum(CLEARABLE)).default([]),
  });

/** What Telegram says about the chat and the bot in it; each part null when Telegram did not answer, with why. */
export interface ChatFacts {
  chat: { type: string; username: string | null } | null;
  status: { status: string; isAdmin: boolean; canInvite: boolean } | null;
  /** Telegram's refusal (or the failure to reach it) of getChat, then getChatMember, when one failed. */
  failure?: TelegramError;
}

async function learnChat(
  deps: Pick<Deps, 'box' | 'config'>,
  bot: BotRow,
  chatId: number,
): Promise<ChatFacts> {
  const tg = createTelegramClient({
    baseUrl: deps.config.TELEGRAM_API_URL,
    token: deps.box.open(bot.token_enc),
    timeoutMs: 3000,
  });
  const failures: TelegramError[] = [];
  const failed = (err: unknown) => {
    failures.push(err instanceof TelegramError ? err : new TelegramError('getChat', 'network', String(err)));
    return null;
  };
  const [chat, member] = await Promise.all([
    tg.getChat({ chat_id: chatId }).catch(failed),
    tg.getChatMember({ chat_id: chatId, user_id: bot.telegram_bot_id }).catch(failed),
  ]);
  return {
    chat: chat ? { type: chat.type, username: chat.username ?? null } : null,
    status: member ? botRights(member) : null,
    ...(failures[0] ? { failure: failures.find((f) => f.kind === 'api') ?? failures[0] } : {}),
  };
}

/**
 * Why Telegram's answers rule the channel out, or null when they allow it: the chat must exist
 * for the bot, and the bot must be an administrator with the right to invite users, or no invite
 * link can be made and every click would fall back to the channel's public link. Pure, so the rule
 * is tested on its own. Telegram not answering is a refusal too: nothing was checked.
 */
export function telegramRefusal(facts: ChatFacts, chatId: number, bot: string): string | null {
  const skip = 'or add it anyway with --skip-telegram-check';
  if (facts.failure && facts.failure.kind !== 'api') {
    const why =
      facts.failure.kind === 'unauthorized' ? "Telegram refused the bot's token" : facts.failure.message;
    return `chat ${chatId} could not be checked with Telegram (${why}): try again, ${skip}`;
  }
  if (facts.chat === null || facts.status === null) {
    return `Telegram does not show chat ${chatId} to ${bot} (${facts.failure?.message ?? 'no answer'}): check the id, and add ${bot} to the chat as an administrator allowed to invite users, ${skip}`;
  }
  if (!facts.status.isAdmin) {
    const st = facts.status.status;
    const is =
      st === 'left' || st === 'kicked' ? `not a member (${st})` : st === 'member' ? 'only a member' : st;
    return `${bot} is ${is} of chat ${chatId}, not an administrator: make it an administrator with the right to invite users ("Invite users via link"), ${skip}`;
  }
  if (!facts.status.canInvite) {
    return `${bot} is an administrator of chat ${chatId} without the right to invite users: give it "Invite users via link" (can_invite_users), ${skip}`;
  }
  return null;
}

function botName(bot: BotRow): string {
  return bot.username ? `the bot @${bot.username}` : `the bot ${bot.telegram_bot_id}`;
}

/**
 * What Telegram lets a channel attribute, decided before it is stored: a chat Telegram calls a
 * basic group is refused (its id changes when it is upgraded); join-request mode is refused in a
 * public chat (one with a username), since Telegram sends join requests to public chats without
 * their invite link (tdlib/telegram-bot-api#580); one-use links in a public chat are accepted with
 * a warning, since anyone may join from the chat's preview instead (tdlib/telegram-bot-api#428).
 * Returns the warnings. `isPublic` is null when neither Telegram nor the input tells.
 */
function judgeChat(
  c: Pick<ChannelInput, 'username' | 'inviteMode' | 'telegramChannelId'>,
  facts: ChatFacts,
): { isPublic: boolean | null; username: string | null; warnings: string[] } {
  if (facts.chat?.type === 'group' || facts.chat?.type === 'private')
    throw new ApiError(
      'VALIDATION_FAILED',
      `chat ${c.telegramChannelId} is a ${facts.chat.type === 'group' ? 'basic group' : 'private chat'}: only channels and supergroups can be tracked`,
    );
  // Telegram's answer decides whether the chat is public; the operator's --username stands in when
  // Telegram did not answer.
  const isPublic = facts.chat ? facts.chat.username !== null : c.username !== undefined ? true : null;
  const username = c.username ?? facts.chat?.username ?? null;
  const warnings: string[] = [];
  if (isPublic && c.inviteMode === 'join_request') {
    throw new ApiError(
      'VALIDATION_FAILED',
      `--invite-mode join_request cannot attribute in a public chat (@${username}): Telegram sends join requests to public chats without their invite link (tdlib/telegram-bot-api#580), so no request could be credited to a click and each would wait for a person to approve it; make the chat private (remove its username) or use --invite-mode member_limit`,
    );
  }
  if (isPublic) {
    warnings.push(
      `chat ${c.telegramChannelId} is public (@${username}): a visitor who opens its invite link can join from the chat's preview without using the link (tdlib/telegram-bot-api#428); those joins are recorded as organic, so part of the clicks will not be attributed. A private chat attributes every join through its link.`,
    );
  }
  return { isPublic, username, warnings };
}

/**
 * Adds a channel to a site. The bot must belong to the site's account. Telegram is asked about
 * the chat (getChat: basic group? public?) and the bot's rights in it (getChatMember), best
 * effort: a channel can be added before the bot is promoted; my_chat_member and the periodic
 * rights check keep the status current afterwards.
 */
export async function addChannel(
  deps: Pick<Deps, 'pool' | 'box' | 'config'>,
  input: z.input<typeof AddChannelInput>,
): Promise<{ channelId: string; warnings: string[] }> {
  const parsed = AddChannelInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'channel');
  const c = parsed.data;
  const site = await requireSite(deps.pool, c.siteId);
  const bot = await findBot(deps.pool, c.botId);
  if (!bot) throw new ApiError('NOT_FOUND', `bot ${c.botId} does not exist`);
  if (bot.account_id !== site.account_id)
    throw new ApiError('FORBIDDEN', 'the bot belongs to another account than the site');

  const facts = await learnChat(deps, bot, c.telegramChannelId);
  const refusal = c.requireTelegram ? telegramRefusal(facts, c.telegramChannelId, botName(bot)) : null;
  if (refusal) throw new ApiError('VALIDATION_FAILED', refusal);
  const { isPublic, username, warnings } = judgeChat(c, facts);
  const status = facts.status;

  let channelId: string;
  try {
    const { rows } = await deps.pool.query<{ id: string }>(
      `INSERT INTO channels (site_id, bot_id, telegram_chat_id, title, username, funnel_order, event_type, custom_event_name,
         fixed_value, fixed_currency, manual_value, invite_mode, public_invite_url, bot_status, bot_is_admin, bot_can_invite, bot_status_at,
         chat_is_public, join_requests, welcome_text, join_gate)
       VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21) RETURNING id`,
      [
        site.id,
        bot.id,
        c.telegramChannelId,
        c.title,
        username,
        c.funnelOrder,
        c.eventType,
        c.customEventName ?? null,
        c.value ?? null,
        c.currency ?? null,
        c.manualValue,
        c.inviteMode,
        c.publicInviteUrl ?? null,
        status?.status ?? null,
        status?.isAdmin ?? null,
        status?.canInvite ?? null,
        status ? new Date() : null,
        isPublic,
        c.joinRequests,
        c.welcomeText ?? null,
        c.joinGate,
      ],
    );
    channelId = rows[0]!.id;
  } catch (err) {
    const e = err as { code?: string; constraint?: string };
    if (e.code === '23505' && e.constraint === 'channels_bot_chat_active')
      throw new ApiError(
        'VALIDATION_FAILED',
        `channel ${c.telegramChannelId} is already added with this bot (on another site); a bot's chat leads to one channel`,
      );
    if (e.code === '23505')
      throw new ApiError('VALIDATION_FAILED', `channel ${c.telegramChannelId} is already on this site`);
    throw err;
  }
  // The first channel of a site becomes its default; --default moves the default.
  await deps.pool.query(
    `UPDATE sites SET default_channel_id = $2 WHERE id = $1 AND ($3 OR default_channel_id IS NULL)`,
    [site.id, channelId, c.isDefault],
  );
  return { channelId, warnings };
}

/**
 * Changes a channel's settings. The result is checked by the rules of `channel add` (the chat asked
 * about again), so no update makes a channel that could not have been added.
 */
export async function updateChannel(
  deps: Pick<Deps, 'pool' | 'box' | 'config'>,
  input: z.input<typeof UpdateChannelInput>,
): Promise<{ channelId: string; warnings: string[] }> {
  const parsed = UpdateChannelInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'channel');
  const u = parsed.data;
  const { rows } = await deps.pool.query<{
    site_id: string;
    bot_id: string;
    telegram_chat_id: string;
    title: string;
    username: string | null;
    funnel_order: number;
    event_type: string;
    custom_event_name: string | null;
    fixed_value: string | null;
    fixed_currency: string | null;
    manual_value: boolean;
    invite_mode: string;
    public_invite_url: string | null;
    is_default: boolean;
    join_requests: string;
    welcome_text: string | null;
    join_gate: string;
  }>(
    `SELECT c.site_id, c.bot_id, c.telegram_chat_id::text, c.title, c.username, c.funnel_order, c.event_type, c.custom_event_name,
       c.fixed_value::text, c.fixed_currency::text, c.manual_value, c.invite_mode, c.public_invite_url, s.default_channel_id = c.id AS is_default,
       c.join_requests, c.welcome_text, c.join_gate
     FROM channels c JOIN sites s ON s.id = c.site_id WHERE c.id = $1 AND c.active`,
    [u.channelId],
  );
  const cur = rows[0];
  if (!cur) throw new ApiError('NOT_FOUND', `channel ${u.channelId} does not exist`);
  // Only the fields the caller gave: the schema's defaults must not overwrite stored settings.
  const given = input as Record<string, unknown>;
  const defined = Object.fromEntries(
    Object.entries(u).filter(
      ([k, v]) => v !== undefined && given[k] !== undefined && k !== 'channelId' && k !== 'clear',
    ),
  );
  const stored: Record<string, unknown> = {
    siteId: cur.site_id,
    botId: cur.bot_id,
    telegramChannelId: cur.telegram_chat_id,
    title: cur.title,
    username: cur.username ?? undefined,
    funnelOrder: cur.funnel_order,
    eventType: cur.event_type,
    customEventName: cur.custom_event_name ?? undefined,
    value: cur.fixed_value ?? undefined,
    currency: cur.fixed_currency ?? undefined,
    manualValue: cur.manual_value,
    isDefault: false,
    inviteMode: cur.invite_mode,
    publicInviteUrl: cur.public_invite_url ?? undefined,
    joinRequests: cur.join_requests,
    welcomeText: cur.welcome_text ?? undefined,
    joinGate: cur.join_gate,
  };
  for (const name of u.clear) {
    for (const field of CLEARS[name]) {
      if (field in defined)
        throw new ApiError('VALIDATION_FAILED', `--clear ${name} and a new value for it cannot go together`);
      stored[field] = field === 'manualValue' ? false : undefined;
    }
  }
  const merged = AddChannelInput.safeParse({ ...stored, ...defined });
  if (!merged.success) throw validationError(merged.error, 'channel');
  const c = merged.data;
  const bot = await findBot(deps.pool, c.botId);
  if (!bot) throw new ApiError('NOT_FOUND', `bot ${c.botId} does not exist`);
  const facts = await learnChat(deps, bot, c.telegramChannelId);
  const refusal = c.requireTelegram ? telegramRefusal(facts, c.telegramChannelId, botName(bot)) : null;
  if (refusal) throw new ApiError('VALIDATION_FAILED', refusal);
  const { isPublic, username, warnings } = judgeChat(c, facts);
  await deps.pool.query(
    `UPDATE channels SET title = $2, username = $3, funnel_order = $4, event_type = $5, custom_event_name = $6, fixed_value = $7,
       fixed_currency = $8, manual_value = $9, invite_mode = $10, public_invite_url = $11, chat_is_public = $12,
       bot_status = COALESCE($13, bot_status), bot_is_admin = COALESCE($14, bot_is_admin), bot_can_invite = COALESCE($15, bot_can_invite),
       bot_status_at = COALESCE($16, bot_status_at), join_requests = $17, welcome_text = $18, join_gate = $19
     WHERE id = $1`,
    [
      u.channelId,
      c.title,
      username,
      c.funnelOrder,
      c.eventType,
      c.customEventName ?? null,
      c.value ?? null,
      c.currency ?? null,
      c.manualValue,
      c.inviteMode,
      c.publicInviteUrl ?? null,
      isPublic,
      facts.status?.status ?? null,
      facts.status?.isAdmin ?? null,
      facts.status?.canInvite ?? null,
      facts.status ? new Date() : null,
      c.joinRequests,
      c.welcomeText ?? null,
      c.joinGate,
    ],
  );
  if (c.isDefault)
    await deps.pool.query('UPDATE sites SET default_channel_id = $2 WHERE id = $1', [
      cur.site_id,
      u.channelId,
    ]);
  return { channelId: u.channelId, warnings };
}

export interface ChannelListItem {
  channelId: string;
  telegramChannelId: string;
  title: string;
  username: string | null;
  funnelOrder: number;
  eventType: string;
  isDefault: boolean;
  botIsAdmin: boolean | null;
  botCanInvite: boolean | null;
  botStatus: string | null;
  poolSize: number;
  /** The channel's join-request rule, and whether requesters get a welcome text. */
  joinRequests: string;
  welcomeText: boolean;
}

export async function listChannels(
  db: Queryable,
  siteIdOrWebsiteId: string,
): Promise<{ channels: ChannelListItem[] }> {
  const site = await requireSite(db, siteIdOrWebsiteId);
  const { rows } = await db.query<{
    id: string;
    telegram_chat_id: number;
    title: string;
    username: string | null;
    funnel_order: number;
    event_type: string;
    bot_is_admin: boolean | null;
    bot_can_invite: boolean | null;
    bot_status: string | null;
    pool_size: number;
    join_requests: string;
    has_welcome: boolean;
  }>(
    `SELECT c.id, c.telegram_chat_id, c.title, c.username, c.funnel_order, c.event_type, c.bot_is_admin, c.bot_can_invite, c.bot_status,
       c.join_requests, c.welcome_text IS NOT NULL AS has_welcome,
       (SELECT count(*)::int FROM invitations i WHERE i.channel_id = c.id AND i.visit_id IS NULL AND i.revoked_at IS NULL
          AND NOT i.unattributed AND (i.expires_at IS NULL OR i.expires_at > now())) AS pool_size
     FROM channels c WHERE c.site_id = $1 AND c.active ORDER BY c.funnel_order, c.created_at, c.id`,
    [site.id],
  );
  return {
    channels: rows.map((r) => ({
      channelId: r.id,
      telegramChannelId: String(r.telegram_chat_id),
      title: r.title,
      username: r.username,
      funnelOrder: r.funnel_order,
      eventType: r.event_type,
      isDefault: r.id === site.default_channel_id,
      botIsAdmin: r.bot_is_admin,
      botCanInvite: r.bot_can_invite,
      botStatus: r.bot_status,
      poolSize: r.pool_size,
      joinRequests: r.join_requests,
      welcomeText: r.has_welcome,
    })),
  };
}

/** Whether the channel is an active one of the site: the dashboard checks it before acting on its join requests. */
export async function isActiveChannelOf(db: Queryable, siteId: string, channelId: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM channels WHERE id = $1 AND site_id = $2 AND active', [
    channelId,
    siteId,
  ]);
  return (rowCount ?? 0) > 0;
}

/** The titles of every channel of the site, removed ones too: reports name the channels of their days. */
export async function channelTitles(db: Queryable, siteId: string): Promise<Record<string, string>> {
  const { rows } = await db.query<{ id: string; title: string }>(
    'SELECT id, title FROM channels WHERE site_id = $1',
    [siteId],
  );
  return Object.fromEntries(rows.map((r) => [r.id, r.title]));
}
