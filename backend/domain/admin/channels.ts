import { z } from 'zod';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { Queryable } from '../../db/pool.js';
import { ApiError, validationError } from '../../errors.js';
import { createTelegramClient } from '../../telegram/client.js';
import { findBot } from './bots.js';
import { requireSite } from './sites.js';
import { Currency, EventType, TelegramChatId, Uuid } from './schemas.js';

export const AddChannelInput = z
  .object({
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
  })
  .superRefine((c, ctx) => {
    if ((c.value === undefined) !== (c.currency === undefined))
      ctx.addIssue({ code: 'custom', path: ['currency'], message: '--value and --currency go together' });
    if (c.manualValue && c.eventType !== 'Purchase')
      ctx.addIssue({ code: 'custom', path: ['manualValue'], message: '--manual-value needs --event-type Purchase' });
    if (c.manualValue && c.value !== undefined)
      ctx.addIssue({ code: 'custom', path: ['manualValue'], message: '--manual-value and a fixed --value exclude each other' });
    if (c.eventType === 'Custom' && !c.customEventName)
      ctx.addIssue({ code: 'custom', path: ['customEventName'], message: 'a Custom event type needs a custom event name' });
  });

export interface ChannelDeps {
  db: Queryable;
  box: SecretBox;
  telegramApiUrl: string;
}

/**
 * Adds a channel to a site. The bot must belong to the site's account. The bot's admin rights are
 * checked with getChatMember when Telegram answers (best effort: a channel can be added before the
 * bot is promoted; my_chat_member keeps the status current afterwards).
 */
export async function addChannel(deps: ChannelDeps, input: z.input<typeof AddChannelInput>): Promise<{ channelId: string }> {
  const parsed = AddChannelInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'channel');
  const c = parsed.data;
  const site = await requireSite(deps.db, c.siteId);
  const bot = await findBot(deps.db, c.botId);
  if (!bot) throw new ApiError('NOT_FOUND', `bot ${c.botId} does not exist`);
  if (bot.account_id !== site.account_id) throw new ApiError('FORBIDDEN', 'the bot belongs to another account than the site');

  let status: { status: string; isAdmin: boolean; canInvite: boolean } | null = null;
  try {
    const tg = createTelegramClient({ baseUrl: deps.telegramApiUrl, token: deps.box.open(bot.token_enc), timeoutMs: 3000 });
    const m = await tg.getChatMember({ chat_id: c.telegramChannelId, user_id: bot.telegram_bot_id });
    const isAdmin = m.status === 'administrator' || m.status === 'creator';
    status = { status: m.status, isAdmin, canInvite: m.status === 'creator' || (isAdmin && m.can_invite_users === true) };
  } catch {
    status = null;
  }

  let channelId: string;
  try {
    const { rows } = await deps.db.query<{ id: string }>(
      `INSERT INTO channels (site_id, bot_id, telegram_chat_id, title, username, funnel_order, event_type, custom_event_name,
         fixed_value, fixed_currency, manual_value, invite_mode, public_invite_url, bot_status, bot_is_admin, bot_can_invite, bot_status_at)
       VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17) RETURNING id`,
      [
        site.id, bot.id, c.telegramChannelId, c.title, c.username ?? null, c.funnelOrder, c.eventType, c.customEventName ?? null,
        c.value ?? null, c.currency ?? null, c.manualValue, c.inviteMode, c.publicInviteUrl ?? null,
        status?.status ?? null, status?.isAdmin ?? null, status?.canInvite ?? null, status ? new Date() : null,
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
  return { channelId };
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
