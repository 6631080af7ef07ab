import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { type Queryable, withTx } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError, validationError } from '../../errors.js';
import { Uuid } from '../admin/schemas.js';
import { requireSite } from '../admin/sites.js';
import type { SpendPlatform, SpendSource } from './importer.js';
import { importerFor } from './importers.js';
import { addMoney } from './roi-rules.js';
import {
  type RunOutcome,
  addDays,
  backfillWindow,
  isDay,
  queueImport,
  recentWindow,
  runImport,
} from './sync.js';

/**
 * A site's spend sources (docs/spend.md): added with credentials the platform accepted (read with
 * the importer's `check`, which also gives the account's currency and time zone), sealed like a
 * pixel's token; the 90-day backfill is queued in the same transaction as the source.
 */
const Token = z.string().trim().min(8, 'looks too short').max(2048);
const TenDigits = (what: string) =>
  z
    .string()
    .trim()
    .transform((s) => s.replace(/-/g, ''))
    .pipe(z.string().regex(/^\d{10}$/, `${what} must be 10 digits`));
const ClientId = z
  .string()
  .trim()
  .regex(/^[A-Za-z0-9._-]{3,256}$/, 'OAuth client id must be 3–256 letters, digits, ., _ or -');

/**
 * An OAuth refresh token comes with the client it was issued to: all three flags or none. Returns
 * how many were given; a partial set is an issue on `refreshToken`.
 */
function refreshFlagsGiven(
  p: { refreshToken?: string; clientId?: string; clientSecret?: string },
  ctx: z.RefinementCtx,
): number {
  const given = [p.refreshToken, p.clientId, p.clientSecret].filter((x) => x !== undefined).length;
  if (given > 0 && given < 3)
    ctx.addIssue({
      code: 'custom',
      path: ['refreshToken'],
      message: '--refresh-token, --client-id and --client-secret go together',
    });
  return given;
}

export const AddSpendSourceInput = z.discriminatedUnion('platform', [
  z.object({
    platform: z.literal('meta'),
    siteId: z.string().min(1),
    adAccount: z
      .string()
      .trim()
      .regex(/^act_\d{1,20}$/, 'Meta ad account must be act_ followed by its digits'),
    accessToken: Token,
  }),
  z
    .object({
      platform: z.literal('google'),
      siteId: z.string().min(1),
      customerId: TenDigits('Google customer id'),
      developerToken: Token,
      oauthToken: Token.optional(),
      refreshToken: Token.optional(),
      clientId: ClientId.optional(),
      clientSecret: Token.optional(),
      loginCustomerId: TenDigits('Google login customer id').optional(),
    })
    .superRefine((p, ctx) => {
      const refresh = refreshFlagsGiven(p, ctx);
      if (refresh === 0 && p.oauthToken === undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['oauthToken'],
          message: 'give --oauth-token, or --refresh-token with --client-id and --client-secret',
        });
    }),
  z.object({
    platform: z.literal('tiktok'),
    siteId: z.string().min(1),
    advertiserId: z
      .string()
      .trim()
      .regex(/^\d{5,25}$/, 'TikTok advertiser id must be 5–25 digits'),
    accessToken: Token,
  }),
  z
    .object({
      platform: z.literal('snapchat'),
      siteId: z.string().min(1),
      adAccount: z.string().trim().uuid('Snap ad account id must be a UUID'),
      accessToken: Token,
      // Snap's access tokens last 30 minutes: with a refresh token the import fetches new ones.
      refreshToken: Token.optional(),
      clientId: ClientId.optional(),
      clientSecret: Token.optional(),
    })
    .superRefine((p, ctx) => {
      refreshFlagsGiven(p, ctx);
    }),
]);
export type AddSpendSourceInput = z.input<typeof AddSpendSourceInput>;

type Parsed = z.output<typeof AddSpendSourceInput>;

/** The platform's account id and the credentials kept sealed (the camelCase of `spend add`'s flags). */
export function accountAndCredentials(p: Parsed): {
  accountRef: string;
  credentials: Record<string, string>;
} {
  switch (p.platform) {
    case 'meta':
      return { accountRef: p.adAccount, credentials: { accessToken: p.accessToken } };
    case 'tiktok':
      return { accountRef: p.advertiserId, credentials: { accessToken: p.accessToken } };
    case 'snapchat':
      return {
        accountRef: p.adAccount.toLowerCase(),
        credentials: {
          accessToken: p.accessToken,
          ...(p.refreshToken === undefined
            ? {}
            : {
                refreshToken: p.refreshToken,
                clientId: p.clientId ?? '',
                clientSecret: p.clientSecret ?? '',
              }),
        },
      };
    case 'google': {
      const c: Record<string, string> = { developerToken: p.developerToken };
      // With a refresh token, access tokens are fetched as needed: a given one would expire unused.
      if (p.refreshToken !== undefined)
        Object.assign(c, {
          refreshToken: p.refreshToken,
          clientId: p.clientId!,
          clientSecret: p.clientSecret!,
        });
      else c.oauthToken = p.oauthToken!;
      if (p.loginCustomerId !== undefined) c.loginCustomerId = p.loginCustomerId;
      return { accountRef: p.customerId, credentials: c };
    }
  }
}

async function refuseDuplicate(
  db: Queryable,
  siteId: string,
  platform: string,
  accountRef: string,
): Promise<void> {
  const { rows } = await db.query<{ id: string }>(
    'SELECT id FROM spend_sources WHERE site_id = $1 AND platform = $2 AND account_ref = $3 AND removed_at IS NULL',
    [siteId, platform, accountRef],
  );
  if (rows[0])
    throw new ApiError(
      'VALIDATION_FAILED',
      `this site already reads spend from ${platform} account ${accountRef} (spend source ${rows[0].id}); a second source would count it twice`,
    );
}

export async function addSpendSource(
  deps: Pick<Deps, 'pool' | 'box' | 'config' | 'now'>,
  input: AddSpendSourceInput,
): Promise<{ spendSourceId: string }> {
  const parsed = AddSpendSourceInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'spend source');
  const p = parsed.data;
  const site = await requireSite(deps.pool, p.siteId);
  const { accountRef, credentials } = accountAndCredentials(p);
  const importer = importerFor(p.platform);
  await refuseDuplicate(deps.pool, site.id, p.platform, accountRef);
  const probe: SpendSource = {
    id: '',
    siteId: site.id,
    platform: p.platform,
    accountRef,
    credentials,
    currency: null,
    timeZone: null,
  };
  const checked = await importer.check(deps.config, probe);
  if (checked.kind === 'refused')
    throw new ApiError('VALIDATION_FAILED', `${p.platform} refused the credentials: ${checked.reason}`);
  const sealed = deps.box.seal(JSON.stringify(credentials));
  const window = backfillWindow(checked.timeZone, deps.now());
  const spendSourceId = await withTx(deps.pool, async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended('capigram:spend:' || $1::text, 0))`, [
      site.id,
    ]);
    await refuseDuplicate(tx, site.id, p.platform, accountRef);
    // A source removed before comes back as it was added now; its spend read then stays.
    const { rows } = await tx.query<{ id: string }>(
      `INSERT INTO spend_sources (site_id, platform, account_ref, credentials, currency, time_zone)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (site_id, platform, account_ref) DO UPDATE SET credentials = EXCLUDED.credentials,
         currency = EXCLUDED.currency, time_zone = EXCLUDED.time_zone, status = 'ok', last_error = NULL,
         backfilled = false, progress = NULL, progress_window = NULL, removed_at = NULL,
         import_lease_token = NULL, import_lease_until = NULL
       RETURNING id`,
      [site.id, p.platform, accountRef, sealed, checked.currency, checked.timeZone],
    );
    const id = rows[0]!.id;
    await queueImport(tx, { sourceId: id, ...window, backfill: true });
    return id;
  });
  return { spendSourceId };
}

export interface SpendSourceSummary {
  spendSourceId: string;
  platform: SpendPlatform;
  account: string;
  status: 'ok' | 'failing';
  lastError: string | null;
  lastSyncedAt: string | null;
  currency: string | null;
  timeZone: string | null;
  backfilled: boolean;
  /** An import is queued, running or waiting out a rate limit. */
  importing: boolean;
  /** The account's last 7 days (today included): rows read and spend per currency. */
  last7Days: { rows: number; spend: Record<string, number> };
}

/** A site's live sources, oldest first; never their credentials. */
export async function listSpendSources(
  db: Queryable,
  siteIdOrWebsiteId: string,
  now: Date,
): Promise<{ spendSources: SpendSourceSummary[] }> {
  const site = await requireSite(db, siteIdOrWebsiteId);
  const { rows } = await db.query<{
    id: string;
    platform: SpendPlatform;
    account_ref: string;
    status: 'ok' | 'failing';
    last_error: string | null;
    last_synced_at: Date | null;
    currency: string | null;
    time_zone: string | null;
    backfilled: boolean;
    importing: boolean;
  }>(
    `SELECT id, platform, account_ref, status, last_error, last_synced_at, currency, time_zone, backfilled,
            (import_lease_until IS NOT NULL AND import_lease_until > now()) AS importing
     FROM spend_sources WHERE site_id = $1 AND removed_at IS NULL ORDER BY created_at, id`,
    [site.id],
  );
  const out: SpendSourceSummary[] = [];
  for (const r of rows) {
    const today = recentWindow(r.time_zone, now).to;
    const { rows: sums } = await db.query<{ currency: string; n: number; spend: string }>(
      `SELECT currency, count(*)::int AS n, sum(spend)::text AS spend FROM spend_daily
       WHERE source_id = $1 AND day BETWEEN $2::date AND $3::date GROUP BY currency ORDER BY currency`,
      [r.id, addDays(today, -6), today],
    );
    const spend: Record<string, number> = {};
    for (const s of sums) addMoney(spend, s.currency, Number(s.spend));
    out.push({
      spendSourceId: r.id,
      platform: r.platform,
      account: r.account_ref,
      status: r.status,
      lastError: r.last_error,
      lastSyncedAt: r.last_synced_at?.toISOString() ?? null,
      currency: r.currency,
      timeZone: r.time_zone,
      backfilled: r.backfilled,
      importing: r.importing,
      last7Days: { rows: sums.reduce((a, s) => a + s.n, 0), spend },
    });
  }
  return { spendSources: out };
}

/** The longest window `spend sync` reads at once (a backfill is 90 days). */
export const MAX_SYNC_DAYS = 400;

export interface SyncReport {
  rows: number;
  /** Per source that did not finish: why, and whether its import goes on by itself. */
  notes: string[];
}

/**
 * `spend sync`: imports each live source of the site now, `from`–`to` (default yesterday and today
 * in each account's time zone). A source that paused (a rate limit) goes on in the worker at the
 * time the platform gave; a failed one is left failing with the reason; one whose import is
 * running elsewhere is left to it.
 */
export async function syncSite(
  deps: Pick<Deps, 'pool' | 'box' | 'config' | 'now'>,
  siteIdOrWebsiteId: string,
  range: { from?: string; to?: string },
): Promise<SyncReport> {
  for (const [flag, v] of [
    ['--from', range.from],
    ['--to', range.to],
  ] as const)
    if (v !== undefined && !isDay(v))
      throw new ApiError('VALIDATION_FAILED', `${flag} must be a day, YYYY-MM-DD`);
  const site = await requireSite(deps.pool, siteIdOrWebsiteId);
  const { rows: sources } = await deps.pool.query<{
    id: string;
    platform: string;
    account_ref: string;
    time_zone: string | null;
  }>(
    'SELECT id, platform, account_ref, time_zone FROM spend_sources WHERE site_id = $1 AND removed_at IS NULL ORDER BY created_at, id',
    [site.id],
  );
  const windows = sources.map((s) => {
    const to = range.to ?? recentWindow(s.time_zone, deps.now()).to;
    return { from: range.from ?? addDays(to, -1), to };
  });
  for (const w of windows) {
    if (w.from > w.to) throw new ApiError('VALIDATION_FAILED', `--from ${w.from} is after --to ${w.to}`);
    if (Date.parse(w.to) - Date.parse(w.from) >= MAX_SYNC_DAYS * 86_400_000)
      throw new ApiError('VALIDATION_FAILED', `--from and --to span more than ${MAX_SYNC_DAYS} days`);
  }
  let rows = 0;
  const notes: string[] = [];
  for (const [i, s] of sources.entries()) {
    const w = windows[i]!;
    const token = randomUUID();
    const out: RunOutcome = await runImport(deps, s.id, w, token);
    const name = `${s.platform} ${s.account_ref}`;
    if ('rows' in out) rows += out.rows;
    if (out.kind === 'paused') {
      await queueImport(deps.pool, { sourceId: s.id, ...w, token, pauses: 1 }, out.retryAfterMs);
      notes.push(
        `${name}: paused (${out.reason}); the worker goes on in ${Math.ceil(out.retryAfterMs / 1000)} s`,
      );
    } else if (out.kind === 'failed') notes.push(`${name}: failed: ${out.reason}`);
    else if (out.kind === 'busy')
      notes.push(
        `${name}: skipped: another import of it runs until ${out.until.toISOString()} at the latest`,
      );
  }
  return { rows, notes };
}

/** `spend remove`: no more imports; the spend read stays in reports. */
export async function removeSpendSource(db: Queryable, sourceId: string): Promise<{ removed: true }> {
  if (!Uuid.safeParse(sourceId).success)
    throw new ApiError('VALIDATION_FAILED', `spend source "${sourceId}" is not a valid id`);
  const { rowCount } = await db.query(
    `UPDATE spend_sources SET removed_at = now(), progress = NULL, progress_window = NULL,
       import_lease_token = NULL, import_lease_until = NULL
     WHERE id = $1 AND removed_at IS NULL`,
    [sourceId],
  );
  if (!rowCount) throw new ApiError('NOT_FOUND', `spend source ${sourceId} does not exist`);
  return { removed: true };
}
