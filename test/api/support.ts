// What the business API tests share: tenants seeded through the admin domain functions, attributed
// joins written as the webhook would leave them (visit, invitation, membership rows), and a small
// HTTP client for /api/v1.
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../backend/config.js';
import { hashApiKey } from '../../backend/crypto/api-keys.js';
import type { SecretBox } from '../../backend/crypto/secret-box.js';
import { withTx, type Pool, type PoolClient } from '../../backend/db/pool.js';
import {
  recordConversion,
  type EventTypeName,
  type RecordedConversion,
} from '../../backend/domain/outbox/conversion-record.js';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { createApiKey } from '../../backend/domain/admin/api-keys.js';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { LEAD_LOCK_CLASS, leadLockKey } from '../../backend/domain/conversions/lead-lock.js';
import { afterAll, beforeAll } from 'vitest';
import { waitUntil } from '../delivery/support.js';
import { startFakes, type Fakes } from '../fakes/index.js';
import { startTestApp, testClock, type TestApp, type TestClock } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

export const META_PIXEL = '1234567890';
export const TIKTOK_PIXEL = 'CTIKTOKPIXEL01';
// Nothing listens here: adding a channel asks Telegram for the bot's rights, best effort.
const NO_TELEGRAM = 'http://127.0.0.1:9';

export type Platform = 'meta' | 'tiktok';

export interface SiteSeed {
  siteId: string;
  websiteId: string;
  channels: { main: string; second: string };
  siteKey: string;
  siteKeyId: string;
}

export interface Tenant {
  accountId: string;
  accountKey: string;
  accountKeyId: string;
  sites: SiteSeed[];
  /** The first site, for tests that need one. */
  site: SiteSeed;
}

let chatSeq = 1_000_000_000 + Math.floor(Math.random() * 1_000_000) * 100;

export async function seedSite(
  pool: Pool,
  box: SecretBox,
  accountId: string,
  botId: string,
  platforms: Platform[],
  domain: string,
): Promise<SiteSeed> {
  const site = await createSite(pool, { accountId, name: domain, domains: [domain] });
  const deps = {
    pool,
    box,
    config: loadConfig({ DATABASE_URL: 'postgres://unused-in-tests/', TELEGRAM_API_URL: NO_TELEGRAM }),
  };
  const main = await addChannel(deps, {
    siteId: site.siteId,
    botId,
    telegramChannelId: `-100${chatSeq++}`,
    title: 'Main',
    funnelOrder: 0,
  });
  const second = await addChannel(deps, {
    siteId: site.siteId,
    botId,
    telegramChannelId: `-100${chatSeq++}`,
    title: 'VIP',
    funnelOrder: 1,
    eventType: 'Purchase',
    manualValue: true,
  });
  for (const p of platforms) {
    if (p === 'meta')
      await addPixel(
        { pool, box },
        { platform: 'meta', siteId: site.siteId, pixelId: META_PIXEL, accessToken: 'meta-test-token' },
      );
    else
      await addPixel(
        { pool, box },
        {
          platform: 'tiktok',
          siteId: site.siteId,
          pixelCode: TIKTOK_PIXEL,
          accessToken: 'tiktok-test-token',
        },
      );
  }
  const key = await createApiKey(pool, { accountId, siteId: site.siteId, name: `${domain} backend` });
  return {
    ...site,
    channels: { main: main.channelId, second: second.channelId },
    siteKey: key.apiKey,
    siteKeyId: key.keyId,
  };
}

/** An account with `sites` sites (two channels each, the given pixels), an account key and a key per site. */
export async function seedTenant(
  pool: Pool,
  box: SecretBox,
  opts: { platforms?: Platform[]; sites?: number } = {},
): Promise<Tenant> {
  const tag = randomBytes(4).toString('hex');
  const { accountId } = await createAccount(pool, { name: `Tenant ${tag}` });
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO bots (account_id, telegram_bot_id, username, token_enc, webhook_secret_hash) VALUES ($1, $2, 'shop_bot', $3, $4) RETURNING id`,
    [
      accountId,
      7_000_000 + Math.floor(Math.random() * 1_000_000),
      box.seal('123456:ABCDEFGHIJKLMNOPQRSTUVWXYZ'),
      hashApiKey(tag),
    ],
  );
  const botId = rows[0]!.id;
  const sites: SiteSeed[] = [];
  for (let i = 0; i < (opts.sites ?? 1); i++)
    sites.push(
      await seedSite(pool, box, accountId, botId, opts.platforms ?? ['meta'], `shop${i}-${tag}.example.com`),
    );
  const key = await createApiKey(pool, { accountId, name: 'account key' });
  return { accountId, accountKey: key.apiKey, accountKeyId: key.keyId, sites, site: sites[0]! };
}

let userSeq = 500_000_000 + Math.floor(Math.random() * 100_000_000);
/** A Telegram user id no other test uses. */
export function newUser(): number {
  return userSeq++;
}

export interface VisitSeed {
  clientIp?: string;
  userAgent?: string;
  fbc?: string;
  fbp?: string;
  gclid?: string;
  href?: string;
  createdAt?: Date;
}

export const VISIT: Required<Omit<VisitSeed, 'createdAt' | 'gclid'>> = {
  clientIp: '203.0.113.7',
  userAgent: 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15',
  fbc: 'fb.1.1700000000000.IwAR-acquisition-click',
  fbp: 'fb.1.1700000000000.123456789',
  href: 'https://shop.example.com/landing?fbclid=IwAR-acquisition-click',
};

export async function insertVisit(pool: Pool, siteId: string, v: VisitSeed = VISIT): Promise<string> {
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO visits (site_id, temp_id, session_id, href, client_ip, user_agent, fbc, fbp, gclid, created_at)
     VALUES ($1, gen_random_uuid(), gen_random_uuid(), $2, $3, $4, $5, $6, $7, COALESCE($8, now())) RETURNING id`,
    [
      siteId,
      v.href ?? null,
      v.clientIp ?? null,
      v.userAgent ?? null,
      v.fbc ?? null,
      v.fbp ?? null,
      v.gclid ?? null,
      v.createdAt ?? null,
    ],
  );
  return rows[0]!.id;
}

/**
 * A join on the site's manual-value channel (`second`), from a visit, as the webhook records it:
 * a conversion awaiting its value, with no send yet.
 */
export async function waitingJoin(
  pool: Pool,
  site: SiteSeed,
  telegramUserId: number,
  eventType: EventTypeName = 'Purchase',
): Promise<RecordedConversion> {
  const visitId = await insertVisit(pool, site.siteId);
  const now = new Date();
  return withTx(pool, (tx) =>
    recordConversion(
      tx,
      {
        siteId: site.siteId,
        channelId: site.channels.second,
        telegramUserId,
        visitId,
        eventType,
        eventTime: now,
        attributedAt: now,
        receivedAt: now,
        source: 'webhook',
        awaitingManualInput: true,
      },
      true,
    ),
  );
}

/** A join attributed through an invite link to a visit, as the webhook records it. */
export async function attributedJoin(
  pool: Pool,
  j: { siteId: string; channelId: string; telegramUserId: number; visit?: VisitSeed; occurredAt?: Date },
): Promise<{ visitId: string }> {
  const visitId = await insertVisit(pool, j.siteId, j.visit ?? VISIT);
  const at = j.occurredAt ?? new Date();
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO invitations (channel_id, invite_link, visit_id, assigned_at, used_at, used_by) VALUES ($1, $2, $3, $4, $4, $5) RETURNING id`,
    [j.channelId, `https://t.me/+${randomBytes(12).toString('base64url')}`, visitId, at, j.telegramUserId],
  );
  await pool.query(
    `INSERT INTO memberships (channel_id, telegram_user_id, kind, invitation_id, visit_id, attributed, occurred_at) VALUES ($1, $2, 'join', $3, $4, true, $5)`,
    [j.channelId, j.telegramUserId, rows[0]!.id, visitId, at],
  );
  return { visitId };
}

/** A new Telegram user who joined the tenant's main channel through a tracked visit: a warm lead. */
export async function warmLead(pool: Pool, tenant: Pick<Tenant, 'site'>): Promise<number> {
  const user = newUser();
  await attributedJoin(pool, {
    siteId: tenant.site.siteId,
    channelId: tenant.site.channels.main,
    telegramUserId: user,
  });
  return user;
}

export interface ApiResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
}

export interface CallOptions {
  key?: string | null;
  headers?: Record<string, string>;
  idempotencyKey?: string;
}

/** A client of `/api/v1` on one base URL. */
export function apiClient(baseUrl: string) {
  async function call<T>(
    method: string,
    path: string,
    body: unknown,
    o: CallOptions,
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...o.headers };
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    if (o.idempotencyKey !== undefined) headers['idempotency-key'] = o.idempotencyKey;
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    const res = await fetch(`${baseUrl}/api/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON (the reference page) */
    }
    return { status: res.status, headers: res.headers, body: parsed as T };
  }
  return {
    post: <T = Record<string, any>>(path: string, body: unknown, o: CallOptions = {}) =>
      call<T>('POST', path, body, o),
    get: <T = Record<string, any>>(path: string, o: CallOptions = {}) => call<T>('GET', path, undefined, o),
    delete: <T = Record<string, any>>(path: string, o: CallOptions = {}) =>
      call<T>('DELETE', path, undefined, o),
  };
}

export type ApiClient = ReturnType<typeof apiClient>;

export async function count(pool: Pool, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params);
  return rows[0]!.n;
}

/**
 * Requests queued in the server behind others that are stuck on a lock the test holds: `hold`
 * takes the lock on a connection of the test's, each `blocker` is sent in turn until `waiters()`
 * (backends waiting on that kind of lock) shows it stuck, then `send` runs, and once its requests
 * have reached the server (`holdMs`, default 300) the lock goes, so that the queued requests leave
 * together.
 */
export async function queuedBehind<T>(
  pool: Pool,
  q: {
    hold: (holder: PoolClient) => Promise<unknown>;
    waiters: () => Promise<number>;
    blockers: (() => Promise<ApiResponse>)[];
    send: () => T;
    holdMs?: number;
    /** Instead of holding `holdMs`, hold until this holds (every request sent is queued, say). */
    until?: () => boolean;
  },
): Promise<{ sent: T; blockers: ApiResponse[] }> {
  const holder = await pool.connect();
  try {
    await holder.query('BEGIN');
    await q.hold(holder);
    const before = await q.waiters();
    const blockers: Promise<ApiResponse>[] = [];
    for (const blocker of q.blockers) {
      blockers.push(blocker());
      await waitUntil(
        async () => (await q.waiters()) >= before + blockers.length,
        10_000,
        'a request stuck on the held lock',
      );
    }
    const sent = q.send();
    if (q.until === undefined) await new Promise((r) => setTimeout(r, q.holdMs ?? 300));
    else await waitUntil(async () => q.until!(), 10_000, 'the requests sent to be queued');
    await holder.query('COMMIT');
    return { sent, blockers: await Promise.all(blockers) };
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    holder.release();
  }
}

/** Takes a lead's business-event lock on the test's own connection (inside its transaction). */
export function lockLead(
  holder: Pick<PoolClient, 'query'>,
  accountId: string,
  telegramUserId: number,
): Promise<unknown> {
  return holder.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [
    LEAD_LOCK_CLASS,
    leadLockKey(accountId, telegramUserId),
  ]);
}

/** What an API test file runs against (see `apiWorld`). */
export interface ApiWorld {
  db: TestDatabase;
  t: TestApp;
  api: ApiClient;
  /** A tenant seeded with `opts.tenant`. */
  tenant: Tenant;
  /** The app's clock (moved by the test) when `opts.clock`. */
  clock: TestClock;
  /** The ad platforms' fakes, the app's worker sending to them, when `opts.fakes`. */
  fakes: Fakes;
}

/**
 * The world an API test file starts from, set up before its tests and taken down after them: its
 * own database (`connections` for the pool), the real app (with the worker and the platforms'
 * fakes, or a test clock, when asked), a client for /api/v1 and a seeded tenant. The fields are
 * filled in by the time the file's own `beforeAll` hooks run.
 */
export function apiWorld(
  opts: {
    connections?: number;
    tenant?: { platforms?: Platform[]; sites?: number };
    clock?: boolean;
    fakes?: boolean;
  } = {},
): ApiWorld {
  const world = {} as ApiWorld;
  beforeAll(async () => {
    if (opts.fakes) world.fakes = await startFakes();
    world.db = await createTestDatabase(opts.connections);
    if (opts.clock) world.clock = testClock();
    world.t = await startTestApp(world.db.pool, {
      ...(opts.clock ? { clock: world.clock } : {}),
      ...(opts.fakes ? { worker: true, env: { ...world.fakes.env } } : {}),
    });
    world.api = apiClient(world.t.url);
    world.tenant = await seedTenant(world.db.pool, world.t.deps.box, opts.tenant);
  });
  afterAll(async () => {
    await world.t?.stop();
    await world.fakes?.closeAll();
    await world.db?.drop();
  });
  return world;
}
