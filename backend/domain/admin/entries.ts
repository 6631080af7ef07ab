import { z } from 'zod';
import { withTx, type Pool, type Queryable } from '../../db/pool.js';
import { ApiError, validationError } from '../../errors.js';
import { findBot } from '../bot-api/bot-state.js';
import { requireSite } from './sites.js';
import { Currency, EventType, Uuid } from './schemas.js';

/**
 * Entries: a site's ways into a bot (`start`: `t.me/<bot>?start=…`) or into a bot's Mini App
 * (`app`: `t.me/<bot>/<app>?startapp=…`), set up by the operator as channels are.
 */
export const AddEntryInput = z
  .object({
    siteId: z.string().trim().min(1),
    botId: Uuid,
    kind: z.enum(['start', 'app']).default('start'),
    /** The Mini App's short name, as BotFather set it (3–30 characters of A-Za-z0-9_). */
    app: z
      .string()
      .trim()
      .regex(/^[A-Za-z0-9_]{3,30}$/, 'must be a Mini App short name (3-30 characters of A-Za-z0-9_)')
      .optional(),
    /** The event sent when the visitor arrives; `none` only ties the visitor to the Telegram user. */
    eventType: z.union([EventType, z.literal('none')]).default('Lead'),
    customEventName: z.string().trim().min(1).max(100).optional(),
    value: z.coerce.number().finite().min(0).max(1e12).optional(),
    currency: Currency.optional(),
    channelId: Uuid.optional(),
    /** Telegram's limit for a message's text. */
    welcomeText: z.string().min(1).max(4096).optional(),
    isDefault: z.boolean().default(false),
  })
  .superRefine((e, ctx) => {
    if (e.kind === 'app' && e.app === undefined)
      ctx.addIssue({ code: 'custom', path: ['app'], message: 'an app entry needs --app SHORT_NAME' });
    if (e.kind === 'start' && e.app !== undefined)
      ctx.addIssue({ code: 'custom', path: ['app'], message: '--app goes with --kind app' });
    if ((e.value === undefined) !== (e.currency === undefined))
      ctx.addIssue({ code: 'custom', path: ['currency'], message: '--value and --currency go together' });
    if (e.eventType === 'Custom' && !e.customEventName)
      ctx.addIssue({
        code: 'custom',
        path: ['customEventName'],
        message: 'a Custom event type needs a custom event name',
      });
    if (e.eventType === 'Purchase' && e.value === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['value'],
        message: 'a Purchase entry needs --value and --currency',
      });
    if (e.eventType === 'none' && e.value !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['value'],
        message: '--event-type none sends nothing: no --value',
      });
  });

export async function addEntry(
  db: Pool,
  input: z.input<typeof AddEntryInput>,
): Promise<{ entryId: string; kind: 'start' | 'app' }> {
  const parsed = AddEntryInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'entry');
  const e = parsed.data;
  const site = await requireSite(db, e.siteId);
  const bot = await findBot(db, e.botId);
  if (!bot || bot.account_id !== site.account_id)
    throw new ApiError('NOT_FOUND', `bot ${e.botId} does not exist in the site's account`);
  if (!bot.username)
    throw new ApiError('VALIDATION_FAILED', 'the bot has no username: Telegram deep links need one');
  if (e.channelId !== undefined) {
    const { rowCount } = await db.query('SELECT 1 FROM channels WHERE id = $1 AND site_id = $2 AND active', [
      e.channelId,
      site.id,
    ]);
    if (!rowCount)
      throw new ApiError('NOT_FOUND', `channel ${e.channelId} is not an active channel of this site`);
  }
  const insert = async (tx: Queryable) => {
    const { rows: first } = await tx.query('SELECT 1 FROM entries WHERE site_id = $1 AND active LIMIT 1', [
      site.id,
    ]);
    // A site's first entry is its default, as a site's first channel is.
    const isDefault = e.isDefault || first.length === 0;
    if (isDefault)
      await tx.query('UPDATE entries SET is_default = false WHERE site_id = $1 AND is_default', [site.id]);
    const { rows } = await tx.query<{ id: string }>(
      `INSERT INTO entries (site_id, bot_id, kind, app_short_name, event_type, custom_event_name, fixed_value, fixed_currency, channel_id, welcome_text, is_default)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
      [
        site.id,
        bot.id,
        e.kind,
        e.app ?? null,
        e.eventType === 'none' ? null : e.eventType,
        e.eventType === 'Custom' ? e.customEventName : null,
        e.value ?? null,
        e.currency ?? null,
        e.channelId ?? null,
        e.welcomeText ?? null,
        isDefault,
      ],
    );
    return rows[0]!.id;
  };
  const entryId = await withTx(db, insert);
  return { entryId, kind: e.kind };
}

export interface EntryListItem {
  entryId: string;
  kind: 'start' | 'app';
  botId: string;
  botUsername: string | null;
  app: string | null;
  /** `none` when the entry sends nothing. */
  eventType: string;
  channelId: string | null;
  isDefault: boolean;
  welcomeText: string | null;
}

export async function listEntries(
  db: Queryable,
  siteIdOrWebsiteId: string,
): Promise<{ entries: EntryListItem[] }> {
  const site = await requireSite(db, siteIdOrWebsiteId);
  const { rows } = await db.query<{
    id: string;
    kind: 'start' | 'app';
    bot_id: string;
    username: string | null;
    app_short_name: string | null;
    event_type: string | null;
    custom_event_name: string | null;
    channel_id: string | null;
    is_default: boolean;
    welcome_text: string | null;
  }>(
    `SELECT e.id, e.kind, e.bot_id, b.username, e.app_short_name, e.event_type, e.custom_event_name, e.channel_id, e.is_default, e.welcome_text
     FROM entries e JOIN bots b ON b.id = e.bot_id WHERE e.site_id = $1 AND e.active ORDER BY e.created_at, e.id`,
    [site.id],
  );
  return {
    entries: rows.map((r) => ({
      entryId: r.id,
      kind: r.kind,
      botId: r.bot_id,
      botUsername: r.username,
      app: r.app_short_name,
      eventType:
        r.event_type === null
          ? 'none'
          : r.event_type === 'Custom'
            ? `Custom:${r.custom_event_name}`
            : r.event_type,
      channelId: r.channel_id,
      isDefault: r.is_default,
      welcomeText: r.welcome_text,
    })),
  };
}
