// What the delivery tests share: a database with a site and one pixel per platform, the fakes,
// the real worker running the delivery tasks with test timings, and helpers to create subjects.
import type { Runner } from 'graphile-worker';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addPixel, type AddPixelInput } from '../../backend/domain/admin/pixels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { recordConversion, type NewConversion } from '../../backend/domain/outbox/conversion-record.js';
import { DeliveryWaker } from '../../backend/domain/outbox/delivery-wake.js';
import { createSends } from '../../backend/domain/outbox/sends.js';
import { withTx, type Pool } from '../../backend/db/pool.js';
import type { DeliveryOptions } from '../../backend/delivery/options.js';
import { startWorker } from '../../backend/worker/runner.js';
import { deliveryTasks } from '../../backend/worker/tasks/deliver.js';
import { testDeps, type TestClock } from '../harness/app.js';
import type { Deps } from '../../backend/deps.js';
import { startFakes, type Fakes } from '../fakes/index.js';

export const META_PIXEL = '1234567890';
export const TIKTOK_PIXEL = 'CTIKTOKPIXEL01';
export const SNAP_PIXEL = 'snap-pixel-0001';
export const GOOGLE_CUSTOMER = '1234567890';
export const GOOGLE_ACTION = '987654321';

/** Short delays so retries happen within a test; the real worker and real timeouts otherwise. */
export const TEST_DELIVERY: Partial<DeliveryOptions> = {
  requestTimeoutMs: 400,
  backoffScale: 0.01,
  leaseMs: 3000,
  // Short leases (the crash tests wait for them to end): no room kept for an outage's writes.
  outcomeRoomMs: 0,
};

export type PixelPlatform = 'meta' | 'tiktok' | 'snapchat' | 'google';

export function pixelInput(siteId: string, platform: PixelPlatform, testEventCode?: string): AddPixelInput {
  switch (platform) {
    case 'meta':
      return { platform, siteId, pixelId: META_PIXEL, accessToken: 'meta-test-token', testEventCode };
    case 'tiktok':
      return { platform, siteId, pixelCode: TIKTOK_PIXEL, accessToken: 'tiktok-test-token', testEventCode };
    case 'snapchat':
      return { platform, siteId, pixelId: SNAP_PIXEL, accessToken: 'snap-test-token' };
    case 'google':
      return {
        platform,
        siteId,
        customerId: GOOGLE_CUSTOMER,
        conversionActions: [GOOGLE_ACTION],
        api: 'ads',
        developerToken: 'google-dev-token',
        oauthToken: 'google-oauth-token',
      };
  }
}

export async function createSiteWith(
  deps: Pick<Deps, 'pool' | 'box'>,
  platforms: PixelPlatform[],
  testEventCode?: string,
): Promise<{ siteId: string; websiteId: string; pixels: Record<string, string> }> {
  const { accountId } = await createAccount(deps.pool, { name: 'Delivery Co' });
  const site = await createSite(deps.pool, { accountId, name: 'Shop', domains: ['shop.example.com'] });
  const pixels: Record<string, string> = {};
  for (const p of platforms)
    pixels[p] = (await addPixel(deps, pixelInput(site.siteId, p, testEventCode))).pixelId;
  return { ...site, pixels };
}

export interface VisitInput {
  href?: string | null;
  referrer?: string | null;
  clientIp?: string | null;
  userAgent?: string | null;
  fbc?: string | null;
  fbp?: string | null;
  gclid?: string | null;
  gbraid?: string | null;
  wbraid?: string | null;
  ttclid?: string | null;
  sccid?: string | null;
  createdAt?: Date;
}

export const UA = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15';

/** A visit row; with `pageView` its PageView sends are created in the same transaction, and the worker woken after it. */
export async function createVisit(
  pool: Pool,
  siteId: string,
  v: VisitInput = {},
  pageView = false,
): Promise<string> {
  const visitId = await withTx(pool, async (tx) => {
    const { rows } = await tx.query<{ id: string }>(
      `INSERT INTO visits (site_id, temp_id, session_id, href, referrer, client_ip, user_agent, fbc, fbp, gclid, ttclid, sccid, created_at, gbraid, wbraid)
       VALUES ($1, gen_random_uuid(), gen_random_uuid(), $2, $3, $4, $5, $6, $7, $8, $9, $10, COALESCE($11, now()), $12, $13) RETURNING id`,
      [
        siteId,
        v.href ?? null,
        v.referrer ?? null,
        v.clientIp ?? null,
        v.userAgent ?? null,
        v.fbc ?? null,
        v.fbp ?? null,
        v.gclid ?? null,
        v.ttclid ?? null,
        v.sccid ?? null,
        v.createdAt ?? null,
        v.gbraid ?? null,
        v.wbraid ?? null,
      ],
    );
    const id = rows[0]!.id;
    if (pageView) await createSends(tx, { kind: 'visit', id, siteId });
    return id;
  });
  if (pageView) wakeDelivery(pool);
  return visitId;
}

// The producers' wake-ups, spaced as a server process spaces them (one waker per pool).
const wakers = new WeakMap<Pool, DeliveryWaker>();
function wakeDelivery(pool: Pool): void {
  let waker = wakers.get(pool);
  if (waker === undefined) wakers.set(pool, (waker = new DeliveryWaker(pool)));
  waker.wake();
}

let nextUser = 700_000_000;

/** A conversion recorded and dispatched the way the webhook and the business API do it. */
export async function createConversion(
  pool: Pool,
  siteId: string,
  c: Partial<NewConversion> = {},
): Promise<{ conversionId: string; sends: { sendId: string; platform: string }[] }> {
  const recorded = await recordConversionUnannounced(pool, siteId, c);
  wakeDelivery(pool);
  return recorded;
}

/** `createConversion` without the wake-up: what a producer that died right after its commit leaves. */
export async function recordConversionUnannounced(
  pool: Pool,
  siteId: string,
  c: Partial<NewConversion> = {},
): Promise<{ conversionId: string; sends: { sendId: string; platform: string }[] }> {
  const now = new Date();
  return withTx(pool, (tx) =>
    recordConversion(
      tx,
      {
        siteId,
        channelId: null,
        telegramUserId: nextUser++,
        visitId: null,
        eventType: 'Subscribe',
        eventTime: now,
        attributedAt: now,
        receivedAt: now,
        source: 'api',
        ...c,
      },
      true,
    ),
  );
}

export interface DeliveryHarness {
  deps: Deps & { clock: TestClock };
  fakes: Fakes;
  worker: Runner | null;
  startWorker(opts?: Partial<DeliveryOptions>, concurrency?: number): Promise<Runner>;
  stopWorker(): Promise<void>;
  close(): Promise<void>;
}

export async function deliveryHarness(pool: Pool): Promise<DeliveryHarness> {
  const fakes = await startFakes();
  const deps = testDeps(pool, { ...fakes.env });
  const h: DeliveryHarness = {
    deps,
    fakes,
    worker: null,
    async startWorker(opts = {}, concurrency = 4) {
      h.worker = await startWorker(deps, {
        extraTasks: deliveryTasks(deps, { ...TEST_DELIVERY, ...opts }),
        crontab: '',
        pollIntervalMs: 100,
        concurrency,
      });
      return h.worker;
    },
    async stopWorker() {
      await h.worker?.stop();
      h.worker = null;
    },
    async close() {
      await h.stopWorker();
      await fakes.closeAll();
    },
  };
  return h;
}

export async function waitUntil<T>(
  probe: () => Promise<T | undefined | false>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface SendRow {
  id: string;
  platform: string;
  status: string;
  attempts: number;
  last_error: string | null;
  skip_reason: string | null;
  event_id: string;
  conversion_id: string | null;
  visit_id: string | null;
  response_summary: unknown;
}

export async function sendsOf(pool: Pool, where = 'true', params: unknown[] = []): Promise<SendRow[]> {
  const { rows } = await pool.query<SendRow>(
    `SELECT id, platform, status, attempts, last_error, skip_reason, event_id, conversion_id, visit_id, response_summary FROM sends WHERE ${where} ORDER BY created_at, id`,
    params,
  );
  return rows;
}

/** Resolves once no send is pending. */
export async function allSettled(pool: Pool, timeoutMs = 10_000): Promise<SendRow[]> {
  await waitUntil(
    async () => (await pool.query(`SELECT 1 FROM sends WHERE status = 'pending' LIMIT 1`)).rowCount === 0,
    timeoutMs,
    'every send to settle',
  );
  return sendsOf(pool);
}
