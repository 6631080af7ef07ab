import { z } from 'zod';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { Queryable } from '../../db/pool.js';
import { ApiError, validationError } from '../../errors.js';
import { createTelegramClient } from '../../telegram/client.js';
import { botRights } from '../telegram/member-status.js';
import { findBot, type BotRow } from './bots.js';
import { requireSite } from './sites.js';
import { Currency, EventType, TelegramChatId, Uuid } from './schemas.js';

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
});

export const AddChannelInput = ChannelFields.superRefine((c, ctx) => {
  if ((c.value === undefined) !== (c.currency === undefined))
    ctx.addIssue({ code: 'custom', path: ['currency'], message: '--value and --currency go together' });
  if (c.manualValue && c.eventType !== 'Purchase')
    ctx.addIssue({ code: 'custom', path: ['manualValue'], message: '--manual-value needs --event-type Purchase' });
  if (c.manualValue && c.value !== undefined)
    ctx.addIssue({ code: 'custom', path: ['manualValue'], message: '--manual-value and a fixed --value exclude each other' });
  if (c.eventType === 'Custom' && !c.customEventName)
    ctx.addIssue({ code: 'custom', path: ['customEventName'], message: 'a Custom event type needs a custom event name' });
});
type ChannelInput = z.infer<typeof AddChannelInput>;

/** What `channel update` may change: any field of `channel add` but the site, the bot and the chat. */
export const UpdateChannelInput = ChannelFields.omit({ siteId: true, botId: true, telegramChannelId: true })
  .partial()
  .extend({ channelId: Uuid });

export interface ChannelDeps {
  db: Queryable;
  box: SecretBox;
  telegramApiUrl: string;
}

/** What Telegram says about the chat and the bot in it; each part null when Telegram did not answer. */
interface ChatFacts {
  chat: { type: string; username: string | null } | null;
  status: { status: string; isAdmin: boolean; canInvite: boolean } | null;
}

async function learnChat(deps: ChannelDeps, bot: BotRow, chatId: number): Promise<ChatFacts> {
  const tg = createTelegramClient({ baseUrl: deps.telegramApiUrl, token: deps.box.open(bot.token_enc), timeoutMs: 3000 });
  const [chat, member] = await Promise.all([
    tg.getChat({ chat_id: chatId }).catch(() => null),
    tg.getChatMember({ chat_id: chatId, user_id: bot.telegram_bot_id }).catch(() => null),
  ]);
  return {
    chat: chat ? { type: chat.type, username: chat.username ?? null } : null,
    status: member ? botRights(member) : null,
  };
}

/**
 * What Telegram lets a channel attribute, decided before it is stored: a chat Telegram calls a
 * basic group is refused (its id changes when it is upgraded); join-request mode is refused in a
 * public chat (one with a username), since Telegram sends join requests to public chats without
 * their invite link (tdlib/telegram-bot-api#580); one-use links in a public chat are accepted with
 * a warning, since anyone may join from the chat's preview instead (tdlib/telegram-bot-api#428).
 * Returns the warnings. `isPublic` is null when neither Telegram nor the input tells.
 */
function judgeChat(c: Pick<ChannelInput, 'username' | 'inviteMode' | 'telegramChannelId'>, facts: ChatFacts): { isPublic: boolean | null; username: string | null; warnings: string[] } {
  if (facts.chat?.type === 'group' || facts.chat?.type === 'private')
    throw new ApiError('VALIDATION_FAILED', `chat ${c.telegramChannelId} is a ${facts.chat.type === 'group' ? 'basic group' : 'private chat'}: only channels and supergroups can be tracked`);
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
export async function addChannel(deps: ChannelDeps, input: z.input<typeof AddChannelInput>): Promise<{ channelId: string; warnings: string[] }> {
  const parsed = AddChannelInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'channel');
  const c = parsed.data;
  const site = await requireSite(deps.db, c.siteId);
  const bot = await findBot(deps.db, c.botId);
  if (!bot) throw new ApiError('NOT_FOUND', `bot ${c.botId} does not exist`);
  if (bot.account_id !== site.account_id) throw new ApiError('FORBIDDEN', 'the bot belongs to another account than the site');

  const facts = await learnChat(deps, bot, c.telegramChannelId);
  const { isPublic, username, warnings } = judgeChat(c, facts);
  const status = facts.status;

  let channelId: string;
  try {
    const { rows } = await deps.db.query<{ id: string }>(
      `INSERT INTO channels (site_id, bot_id, telegram_chat_id, title, username, funnel_order, event_type, custom_event_name,
         fixed_value, fixed_currency, manual_value, invite_mode, public_invite_url, bot_status, bot_is_admin, bot_can_invite, bot_status_at,
         chat_is_public)
       VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18) RETURNING id`,
      [
        site.id, bot.id, c.telegramChannelId, c.title, username, c.funnelOrder, c.eventType, c.customEventName ?? null,
        c.value ?? null, c.currency ?? null, c.manualValue, c.inviteMode, c.publicInviteUrl ?? null,
        status?.status ?? null, status?.isAdmin ?? null, status?.canInvite ?? null, status ? new Date() : null, isPublic,
      ],
    );
    channelId = rows[0]!.id;
  } catch (err) {
    const e = err as { code?: string; constraint?: string };
    if (e.code === '23505' && e.constraint === 'channels_bot_chat_active')
      throw new ApiError('VALIDATION_FAILED', `channel ${c.telegramChannelId} is already added with this bot (on another site); a bot's chat leads to one channel`);
    if (e.code === '23505') throw new ApiError('VALIDATION_FAILED', `channel ${c.telegramChannelId} is already on this site`);
    throw err;
  }
  // The first channel of a site becomes its default; --default moves the default.
  await deps.db.query(
    `UPDATE sites SET default_channel_id = $2 WHERE id = $1 AND ($3 OR default_channel_id IS NULL)`,
    [site.id, channelId, c.isDefault],
  );
  return { channelId, warnings };
}

/**
 * Changes a channel's settings. The result is checked by the rules of `channel add` (the chat asked
 * about again), so no update makes a channel that could not have been added.
 */
export async function updateChannel(deps: ChannelDeps, input: z.input<typeof UpdateChannelInput>): Promise<{ channelId: string; warnings: string[] }> {
  const parsed = UpdateChannelInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'channel');
  const u = parsed.data;
  const { rows } = await deps.db.query<{
    site_id: string; bot_id: string; telegram_chat_id: string; title: string; username: string | null; funnel_order: number; event_type: string;
    custom_event_name: string | null; fixed_value: string | null; fixed_currency: string | null; manual_value: boolean; invite_mode: string;
    public_invite_url: string | null; is_default: boolean;
  }>(
    `SELECT c.site_id, c.bot_id, c.telegram_chat_id::text, c.title, c.username, c.funnel_order, c.event_type, c.custom_event_name,
       c.fixed_value::text, c.fixed_currency::text, c.manual_value, c.invite_mode, c.public_invite_url, s.default_channel_id = c.id AS is_default
     FROM channels c JOIN sites s ON s.id = c.site_id WHERE c.id = $1 AND c.active`,
    [u.channelId],
  );
  const cur = rows[0];
  if (!cur) throw new ApiError('NOT_FOUND', `channel ${u.channelId} does not exist`);
  // Only the fields the caller gave: the schema's defaults must not overwrite stored settings.
  const given = input as Record<string, unknown>;
  const defined = Object.fromEntries(Object.entries(u).filter(([k, v]) => v !== undefined && given[k] !== undefined && k !== 'channelId'));
  const merged = AddChannelInput.safeParse({
    siteId: cur.site_id, botId: cur.bot_id, telegramChannelId: cur.telegram_chat_id, title: cur.title, username: cur.username ?? undefined,
    funnelOrder: cur.funnel_order, eventType: cur.event_type, customEventName: cur.custom_event_name ?? undefined,
    value: cur.fixed_value ?? undefined, currency: cur.fixed_currency ?? undefined, manualValue: cur.manual_value,
    isDefault: false, inviteMode: cur.invite_mode, publicInviteUrl: cur.public_invite_url ?? undefined, ...defined,
  });
  if (!merged.success) throw validationError(merged.error, 'channel');
  const c = merged.data;
  const bot = await findBot(deps.db, c.botId);
  if (!bot) throw new ApiError('NOT_FOUND', `bot ${c.botId} does not exist`);
  const facts = await learnChat(deps, bot, c.telegramChannelId);
  const { isPublic, username, warnings } = judgeChat(c, facts);
  await deps.db.query(
    `UPDATE channels SET title = $2, username = $3, funnel_order = $4, event_type = $5, custom_event_name = $6, fixed_value = $7,
       fixed_currency = $8, manual_value = $9, invite_mode = $10, public_invite_url = $11, chat_is_public = $12,
       bot_status = COALESCE($13, bot_status), bot_is_admin = COALESCE($14, bot_is_admin), bot_can_invite = COALESCE($15, bot_can_invite),
       bot_status_at = COALESCE($16, bot_status_at)
     WHERE id = $1`,
    [
      u.channelId, c.title, username, c.funnelOrder, c.eventType, c.customEventName ?? null, c.value ?? null, c.currency ?? null,
      c.manualValue, c.inviteMode, c.publicInviteUrl ?? null, isPublic, facts.status?.status ?? null, facts.status?.isAdmin ?? null,
      facts.status?.canInvite ?? null, facts.status ? new Date() : null,
    ],
  );
  if (c.isDefault) await deps.db.query('UPDATE sites SET default_channel_id = $2 WHERE id = $1', [cur.site_id, u.channelId]);
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
}

export async function listChannels(db: Queryable, siteIdOrWebsiteId: string): Promise<{ channels: ChannelListItem[] }> {
  const site = await requireSite(db, siteIdOrWebsiteId);
  const { rows } = await db.query<{
    id: string; telegram_chat_id: number; title: string; username: string | null; funnel_order: number; event_type: string;
    bot_is_admin: boolean | null; bot_can_invite: boolean | null; bot_status: string | null; pool_size: number;
  }>(
    `SELECT c.id, c.telegram_chat_id, c.title, c.username, c.funnel_order, c.event_type, c.bot_is_admin, c.bot_can_invite, c.bot_status,
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
    })),
  };
}
