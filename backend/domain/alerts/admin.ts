import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError, validationError } from '../../errors.js';
import { requireSite } from '../admin/sites.js';
import { requirePublicTarget } from '../webhooks/target-check.js';

export const AddAlertInput = z
  .object({
    site: z.string().trim().min(1),
    telegramChatId: z
      .string()
      .trim()
      .regex(/^-?[1-9]\d{0,15}$/, 'must be a Telegram chat id (an integer, negative for groups and channels)')
      .optional(),
    webhookUrl: z
      .string()
      .trim()
      .max(2048)
      .url('must be a URL')
      .refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL')
      .optional(),
  })
  .refine((a) => (a.telegramChatId === undefined) !== (a.webhookUrl === undefined), {
    path: ['telegramChatId'],
    message: 'give exactly one of --telegram-chat-id and --webhook-url',
  });

/** `alert add`: a Telegram chat (the account's bot must be able to write there) or a public webhook URL. */
export async function addAlert(
  deps: Pick<Deps, 'pool' | 'config'>,
  input: z.input<typeof AddAlertInput>,
): Promise<{ alertId: string }> {
  const parsed = AddAlertInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'alert');
  const a = parsed.data;
  if (a.webhookUrl !== undefined)
    await requirePublicTarget(deps.config, a.webhookUrl, 'webhookUrl', '--webhook-url');
  const site = await requireSite(deps.pool, a.site);
  const { rows } = await deps.pool.query<{ id: string }>(
    'INSERT INTO alerts (site_id, telegram_chat_id, webhook_url) VALUES ($1, $2, $3) RETURNING id',
    [site.id, a.telegramChatId ?? null, a.webhookUrl ?? null],
  );
  return { alertId: rows[0]!.id };
}

export async function listAlerts(
  db: Queryable,
  siteRef: string,
): Promise<{
  alerts: { alertId: string; telegramChatId: string | null; webhookUrl: string | null; active: string[] }[];
}> {
  const site = await requireSite(db, siteRef);
  const { rows } = await db.query<{
    id: string;
    telegram_chat_id: string | null;
    webhook_url: string | null;
    active: string[];
  }>(
    `SELECT a.id, a.telegram_chat_id::text, a.webhook_url,
       ARRAY(SELECT s.condition FROM alert_states s WHERE s.alert_id = a.id AND s.active ORDER BY s.started_at) AS active
     FROM alerts a WHERE a.site_id = $1 AND a.removed_at IS NULL ORDER BY a.created_at`,
    [site.id],
  );
  return {
    alerts: rows.map((r) => ({
      alertId: r.id,
      telegramChatId: r.telegram_chat_id,
      webhookUrl: r.webhook_url,
      active: r.active,
    })),
  };
}

export async function removeAlert(db: Queryable, alertId: string): Promise<{ removed: true }> {
  if (!z.string().uuid().safeParse(alertId).success)
    throw new ApiError('VALIDATION_FAILED', '--alert must be an alertId (a UUID)');
  const { rowCount } = await db.query(
    'UPDATE alerts SET removed_at = now() WHERE id = $1 AND removed_at IS NULL',
    [alertId],
  );
  if (!rowCount) throw new ApiError('NOT_FOUND', `alert ${alertId} does not exist (or was removed)`);
  return { removed: true };
}
