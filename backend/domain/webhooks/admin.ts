import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError, validationError } from '../../errors.js';
import { requireSite } from '../admin/sites.js';
import { requirePublicTarget } from './target-check.js';

/** The events a webhook can hear, in the contract's names. */
export const WEBHOOK_EVENTS = [
  'conversion.created',
  'conversion.sent',
  'conversion.failed',
  'join',
  'leave',
] as const;

const HttpUrl = z
  .string()
  .trim()
  .max(2048)
  .url('must be a URL')
  .refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL');

export const AddWebhookInput = z.object({
  site: z.string().trim().min(1),
  url: HttpUrl,
  events: z
    .array(z.enum(WEBHOOK_EVENTS, { message: `must be one of ${WEBHOOK_EVENTS.join(', ')}` }))
    .max(WEBHOOK_EVENTS.length)
    .default([...WEBHOOK_EVENTS])
    .transform((e) => (e.length === 0 ? [...WEBHOOK_EVENTS] : [...new Set(e)])),
});

/**
 * `webhook add`: the secret is printed once; it is stored sealed, since every POST is signed with it.
 * The URL must be a public target (backend/outbound/), checked here and at each delivery.
 */
export async function addWebhook(
  deps: Pick<Deps, 'pool' | 'box' | 'config'>,
  input: z.input<typeof AddWebhookInput>,
): Promise<{ webhookId: string; secret: string }> {
  const parsed = AddWebhookInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'webhook');
  const w = parsed.data;
  await requirePublicTarget(deps.config, w.url, 'url', '--url');
  const site = await requireSite(deps.pool, w.site);
  const secret = `whsec_${randomBytes(24).toString('base64url')}`;
  const { rows } = await deps.pool.query<{ id: string }>(
    'INSERT INTO webhooks (site_id, url, secret_enc, events) VALUES ($1, $2, $3, $4) RETURNING id',
    [site.id, w.url, deps.box.seal(secret), w.events],
  );
  return { webhookId: rows[0]!.id, secret };
}

export interface WebhookView {
  webhookId: string;
  siteId: string;
  url: string;
  events: string[];
  createdAt: string;
}

export async function listWebhooks(db: Queryable, siteRef: string): Promise<{ webhooks: WebhookView[] }> {
  const site = await requireSite(db, siteRef);
  const { rows } = await db.query<{
    id: string;
    site_id: string;
    url: string;
    events: string[];
    created_at: Date;
  }>(
    'SELECT id, site_id, url, events, created_at FROM webhooks WHERE site_id = $1 AND removed_at IS NULL ORDER BY created_at',
    [site.id],
  );
  return {
    webhooks: rows.map((r) => ({
      webhookId: r.id,
      siteId: r.site_id,
      url: r.url,
      events: r.events,
      createdAt: r.created_at.toISOString(),
    })),
  };
}

/** Stops a webhook: nothing more is recorded for it, and what waits is dropped by its next delivery run. */
export async function removeWebhook(db: Queryable, webhookId: string): Promise<{ removed: true }> {
  if (!z.string().uuid().safeParse(webhookId).success)
    throw new ApiError('VALIDATION_FAILED', '--webhook must be a webhookId (a UUID)');
  const { rowCount } = await db.query(
    'UPDATE webhooks SET removed_at = now() WHERE id = $1 AND removed_at IS NULL',
    [webhookId],
  );
  if (!rowCount) throw new ApiError('NOT_FOUND', `webhook ${webhookId} does not exist (or was removed)`);
  return { removed: true };
}

export interface DeliveryView {
  deliveryId: string;
  eventId: string;
  type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: string;
  deliveredAt: string | null;
  nextAttemptAt: string | null;
}

const DeliveriesInput = z.object({
  webhookId: z.string().uuid('must be a webhookId (a UUID)'),
  limit: z.number().int().min(1).max(1000).default(50),
  siteId: z.string().uuid().optional(),
});

/** The delivery log of a webhook, newest first; `siteId` scopes it for a caller bound to one site. */
export async function listDeliveries(
  db: Queryable,
  input: z.input<typeof DeliveriesInput>,
): Promise<{ deliveries: DeliveryView[] }> {
  const parsed = DeliveriesInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'webhook');
  const q = parsed.data;
  await requireWebhook(db, q.webhookId, q.siteId);
  const { rows } = await db.query<{
    id: string;
    event_id: string;
    type: string;
    attempts: number;
    last_status: number | null;
    last_error: string | null;
    created_at: Date;
    delivered_at: Date | null;
    dropped_at: Date | null;
    next_attempt_at: Date | null;
  }>(
    `SELECT id::text, event_id, type, attempts, last_status, last_error, created_at, delivered_at, dropped_at, next_attempt_at
     FROM webhook_events WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2`,
    [q.webhookId, q.limit],
  );
  return {
    deliveries: rows.map((r) => ({
      deliveryId: r.id,
      eventId: r.event_id,
      type: r.type,
      status: r.delivered_at ? 'delivered' : r.dropped_at ? 'failed' : 'pending',
      attempts: r.attempts,
      lastStatus: r.last_status,
      lastError: r.last_error,
      createdAt: r.created_at.toISOString(),
      deliveredAt: r.delivered_at?.toISOString() ?? null,
      nextAttemptAt: r.next_attempt_at?.toISOString() ?? null,
    })),
  };
}

async function requireWebhook(db: Queryable, webhookId: string, siteId?: string): Promise<void> {
  const { rowCount } = await db.query(
    'SELECT 1 FROM webhooks WHERE id = $1 AND ($2::uuid IS NULL OR site_id = $2)',
    [webhookId, siteId ?? null],
  );
  if (!rowCount) throw new ApiError('NOT_FOUND', `webhook ${webhookId} does not exist`);
}

/**
 * Resend: the delivery's event is queued again as a new delivery at the end of its lead's queue,
 * with the same event id (the receiver's de-duplication key) and data. Answers the new delivery.
 */
export async function resendDelivery(
  db: Queryable,
  input: { webhookId: string; deliveryId: string; siteId?: string },
): Promise<{ deliveryId: string; status: 'pending' }> {
  if (!z.string().uuid().safeParse(input.webhookId).success || !/^\d{1,18}$/.test(input.deliveryId))
    throw new ApiError('VALIDATION_FAILED', 'a webhookId (UUID) and a deliveryId (a number) are required');
  await requireWebhook(db, input.webhookId, input.siteId);
  const { rows } = await db.query<{ id: string }>(
    `WITH again AS (
       INSERT INTO webhook_events (webhook_id, event_id, type, telegram_user_id, data)
       SELECT e.webhook_id, e.event_id, e.type, e.telegram_user_id, e.data
       FROM webhook_events e JOIN webhooks w ON w.id = e.webhook_id AND w.removed_at IS NULL
       WHERE e.id = $1 AND e.webhook_id = $2
       RETURNING id, webhook_id, telegram_user_id)
     SELECT again.id::text, capigram_webhook_wake(again.webhook_id, again.telegram_user_id) FROM again`,
    [input.deliveryId, input.webhookId],
  );
  const row = rows[0];
  if (!row)
    throw new ApiError(
      'NOT_FOUND',
      `delivery ${input.deliveryId} of webhook ${input.webhookId} does not exist`,
    );
  return { deliveryId: row.id, status: 'pending' };
}
