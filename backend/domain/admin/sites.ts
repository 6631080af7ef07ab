import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { withTx, type Pool, type Queryable } from '../../db/pool.js';
import { ApiError, validationError } from '../../errors.js';
import { requireAccount } from './accounts.js';
import { installStates, type SiteInstallState } from '../tracker/install-signals.js';
import { Domain, Name, Uuid } from './schemas.js';
import { supportedCountry } from '../pii/normalize.js';

export const CreateSiteInput = z.object({
  accountId: Uuid,
  name: Name,
  domains: z.array(Domain).min(1, 'at least one --domain is required').max(50),
  url: z
    .string()
    .trim()
    .url()
    .max(2048)
    .refine((u) => /^https?:/.test(u), 'must be an http(s) URL')
    .optional(),
  googleAdUserData: z
    .enum(['granted', 'denied', 'default'], { message: 'must be granted, denied or default' })
    .optional(),
  defaultCountry: z
    .string()
    .trim()
    .transform((c) => c.toUpperCase())
    .refine(
      (c) => c === 'NONE' || supportedCountry(c) !== undefined,
      'must be an ISO 3166-1 alpha-2 country code such as US or DE (or none)',
    )
    .optional(),
  telegramActionSource: z.enum(['website', 'chat'], { message: 'must be website or chat' }).optional(),
  /** docs/consent.md: `implied` (default), a visit without `consent` counts as granted; `required`, as denied. */
  consentMode: z.enum(['implied', 'required'], { message: 'must be implied or required' }).optional(),
  /** Meta's Limited Data Use and TikTok's limited data use on every event of the site. */
  limitedDataUse: z.enum(['on', 'off'], { message: 'must be on or off' }).optional(),
});

/** `none` clears the setting. */
function countryColumn(v: string | undefined): string | null {
  return v === undefined || v === 'NONE' ? null : v;
}

/** `default` (or nothing): the configured GOOGLE_ADS_AD_USER_DATA_CONSENT applies. */
function consentColumn(v: 'granted' | 'denied' | 'default' | undefined): 'GRANTED' | 'DENIED' | null {
  return v === 'granted' ? 'GRANTED' : v === 'denied' ? 'DENIED' : null;
}

/** Public site identifier: safe in URLs and cookies, unguessable enough not to enumerate sites. */
function newWebsiteId(): string {
  return `ws_${randomBytes(12).toString('base64url')}`;
}

export async function createSite(
  db: Queryable,
  input: z.input<typeof CreateSiteInput>,
): Promise<{ siteId: string; websiteId: string }> {
  const parsed = CreateSiteInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'site');
  const s = parsed.data;
  await requireAccount(db, s.accountId);
  await refuseTakenDomains(db, s.accountId, s.domains, null);
  const websiteId = newWebsiteId();
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO sites (account_id, website_id, name, url, domains, google_ad_user_data, default_country, telegram_action_source,
       consent_mode, limited_data_use)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
    [
      s.accountId,
      websiteId,
      s.name,
      s.url ?? null,
      [...new Set(s.domains)],
      consentColumn(s.googleAdUserData),
      countryColumn(s.defaultCountry),
      s.telegramActionSource ?? 'website',
      s.consentMode ?? 'implied',
      s.limitedDataUse === 'on',
    ],
  );
  return { siteId: rows[0]!.id, websiteId };
}

export interface SiteRow {
  id: string;
  account_id: string;
  website_id: string;
  name: string;
  domains: string[];
  default_channel_id: string | null;
  dedup_window_seconds: number;
}

/**
 * Two sites of an account serving one domain would split its visits between them at random (the
 * tracker and the proxy find a site by its domain): a domain another site of the account already
 * has is refused, naming that site.
 */
async function refuseTakenDomains(
  db: Queryable,
  accountId: string,
  domains: readonly string[],
  exceptSiteId: string | null,
): Promise<void> {
  if (domains.length === 0) return;
  const { rows } = await db.query<{ domain: string; website_id: string; name: string }>(
    `SELECT d AS domain, s.website_id, s.name FROM sites s CROSS JOIN LATERAL unnest(s.domains) d
     WHERE s.account_id = $1 AND s.removed_at IS NULL AND ($3::uuid IS NULL OR s.id <> $3) AND d = ANY($2::text[])
     ORDER BY d LIMIT 1`,
    [accountId, [...domains], exceptSiteId],
  );
  const taken = rows[0];
  if (taken)
    throw fieldError(
      'domains',
      `${taken.domain} is already a domain of site ${taken.website_id} ("${taken.name}") of this account; remove it there first (site update --remove-domain) or use that site`,
    );
}

/** A site by its id or its public websiteId. */
export async function findSite(db: Queryable, idOrWebsiteId: string): Promise<SiteRow | null> {
  const byId = Uuid.safeParse(idOrWebsiteId).success;
  const { rows } = await db.query<SiteRow>(
    `SELECT id, account_id, website_id, name, domains, default_channel_id, dedup_window_seconds
     FROM sites WHERE ${byId ? 'id = $1::uuid' : 'website_id = $1'} AND removed_at IS NULL`,
    [idOrWebsiteId],
  );
  return rows[0] ?? null;
}

export async function requireSite(db: Queryable, idOrWebsiteId: string): Promise<SiteRow> {
  const site = await findSite(db, idOrWebsiteId);
  if (!site) throw new ApiError('NOT_FOUND', `site ${idOrWebsiteId} does not exist`);
  return site;
}

/** 0 turns the dedup of recent matching conversions off; 90 days is more than any funnel needs. */
export const MAX_DEDUP_WINDOW_SECONDS = 90 * 24 * 3600;

export const UpdateSiteInput = z.object({
  siteId: z.string().trim().min(1),
  dedupWindowSeconds: z
    .number()
    .int('must be a whole number of seconds')
    .min(0, 'must be 0 or more')
    .max(MAX_DEDUP_WINDOW_SECONDS, `must be at most ${MAX_DEDUP_WINDOW_SECONDS} (90 days)`)
    .optional(),
  addDomains: z.array(Domain).max(50).default([]),
  removeDomains: z.array(Domain).max(50).default([]),
  googleAdUserData: CreateSiteInput.shape.googleAdUserData,
  defaultCountry: CreateSiteInput.shape.defaultCountry,
  telegramActionSource: CreateSiteInput.shape.telegramActionSource,
  url: CreateSiteInput.shape.url,
  consentMode: CreateSiteInput.shape.consentMode,
  limitedDataUse: CreateSiteInput.shape.limitedDataUse,
});

export const UPDATE_FLAGS =
  '--dedup-window-seconds, --add-domain, --remove-domain, --google-ad-user-data, --default-country, --telegram-action-source or --url (or --consent, --limited-data-use)';

export interface SiteSettings {
  siteId: string;
  domains: string[];
  dedupWindowSeconds: number;
  /** The site's Google ad-user-data consent; null: the configured default. */
  googleAdUserData: 'GRANTED' | 'DENIED' | null;
  /** ISO 3166-1 alpha-2 country of phone numbers written nationally; null: none. */
  defaultCountry: string | null;
  telegramActionSource: 'website' | 'chat';
  /** The site's own address, reported as the page of an `/r/…` click; null: its first domain's root. */
  url: string | null;
  consentMode: 'implied' | 'required';
  limitedDataUse: boolean;
}

/**
 * Changes a site's dedup window and domains. Domains are normalised as at creation; a site keeps
 * at least one (the tracker accepts nothing without) and at most 50. Removing a domain the site
 * does not have is refused, so a typo does not pass for a removal.
 */
export async function updateSite(pool: Pool, input: z.input<typeof UpdateSiteInput>): Promise<SiteSettings> {
  const parsed = UpdateSiteInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'site');
  const u = parsed.data;
  if (
    u.dedupWindowSeconds === undefined &&
    u.addDomains.length === 0 &&
    u.removeDomains.length === 0 &&
    u.googleAdUserData === undefined &&
    u.defaultCountry === undefined &&
    u.telegramActionSource === undefined &&
    u.url === undefined &&
    u.consentMode === undefined &&
    u.limitedDataUse === undefined
  ) {
    throw new ApiError('VALIDATION_FAILED', `nothing to change: give ${UPDATE_FLAGS}`);
  }
  const both = u.addDomains.filter((d) => u.removeDomains.includes(d));
  if (both.length > 0) throw fieldError('removeDomains', `${both[0]} is both added and removed`);
  return withTx(pool, async (tx) => {
    const found = await findSite(tx, u.siteId);
    if (!found) throw new ApiError('NOT_FOUND', `site ${u.siteId} does not exist`);
    const { rows } = await tx.query<{
      domains: string[];
      dedup_window_seconds: number;
      google_ad_user_data: 'GRANTED' | 'DENIED' | null;
      default_country: string | null;
      telegram_action_source: 'website' | 'chat';
      url: string | null;
      consent_mode: 'implied' | 'required';
      limited_data_use: boolean;
    }>(
      'SELECT domains, dedup_window_seconds, google_ad_user_data, default_country, telegram_action_source, url, consent_mode, limited_data_use FROM sites WHERE id = $1 FOR UPDATE',
      [found.id],
    );
    const current = rows[0]!;
    const missing = u.removeDomains.find((d) => !current.domains.includes(d));
    if (missing !== undefined)
      throw fieldError(
        'removeDomains',
        `${missing} is not one of the site's domains (${current.domains.join(', ')})`,
      );
    const domains = [
      ...new Set([...current.domains.filter((d) => !u.removeDomains.includes(d)), ...u.addDomains]),
    ];
    await refuseTakenDomains(tx, found.account_id, u.addDomains, found.id);
    if (domains.length === 0)
      throw fieldError(
        'removeDomains',
        'a site keeps at least one domain: add its replacement in the same command',
      );
    if (domains.length > 50) throw fieldError('addDomains', 'a site has at most 50 domains');
    const dedup = u.dedupWindowSeconds ?? current.dedup_window_seconds;
    const consent =
      u.googleAdUserData === undefined ? current.google_ad_user_data : consentColumn(u.googleAdUserData);
    const country =
      u.defaultCountry === undefined ? current.default_country : countryColumn(u.defaultCountry);
    const telegram = u.telegramActionSource ?? current.telegram_action_source;
    const url = u.url ?? current.url;
    const consentMode = u.consentMode ?? current.consent_mode;
    const limitedDataUse =
      u.limitedDataUse === undefined ? current.limited_data_use : u.limitedDataUse === 'on';
    await tx.query(
      'UPDATE sites SET domains = $2, dedup_window_seconds = $3, google_ad_user_data = $4, default_country = $5, telegram_action_source = $6, url = $7, consent_mode = $8, limited_data_use = $9 WHERE id = $1',
      [found.id, domains, dedup, consent, country, telegram, url, consentMode, limitedDataUse],
    );
    return {
      siteId: found.id,
      domains,
      dedupWindowSeconds: dedup,
      googleAdUserData: consent,
      defaultCountry: country,
      telegramActionSource: telegram,
      url,
      consentMode,
      limitedDataUse,
    };
  });
}

function fieldError(path: string, message: string): ApiError {
  return new ApiError('VALIDATION_FAILED', `site: ${path}: ${message}`, { errors: [{ path, message }] });
}

export interface SiteListItem {
  siteId: string;
  websiteId: string;
  accountId: string;
  name: string;
  url: string | null;
  domains: string[];
  defaultChannelId: string | null;
  channels: number;
  activePixels: number;
  createdAt: string;
  /** Install checks: the first and latest track/init visit seen (null: none yet), and the hosts refused. */
  firstVisitAt: string | null;
  lastVisitAt: string | null;
  refusedHosts: SiteInstallState['refusedHosts'];
}

/** The sites of one account, or of every account, oldest first. */
export async function listSites(db: Queryable, accountId?: string): Promise<{ sites: SiteListItem[] }> {
  if (accountId !== undefined) await requireAccount(db, accountId);
  const { rows } = await db.query<{
    id: string;
    website_id: string;
    account_id: string;
    name: string;
    url: string | null;
    domains: string[];
    default_channel_id: string | null;
    channels: number;
    active_pixels: number;
    created_at: Date;
  }>(
    `SELECT s.id, s.website_id, s.account_id, s.name, s.url, s.domains, s.default_channel_id, s.created_at,
       (SELECT count(*)::int FROM channels c WHERE c.site_id = s.id AND c.active) AS channels,
       (SELECT count(*)::int FROM pixels p WHERE p.site_id = s.id AND p.active) AS active_pixels
     FROM sites s WHERE ($1::uuid IS NULL OR s.account_id = $1) AND s.removed_at IS NULL ORDER BY s.created_at, s.id`,
    [accountId ?? null],
  );
  const install = await installStates(
    db,
    rows.map((r) => r.id),
  );
  return {
    sites: rows.map((r) => ({
      siteId: r.id,
      websiteId: r.website_id,
      accountId: r.account_id,
      name: r.name,
      url: r.url,
      domains: r.domains,
      defaultChannelId: r.default_channel_id,
      channels: r.channels,
      activePixels: r.active_pixels,
      createdAt: r.created_at.toISOString(),
      firstVisitAt: install.get(r.id)?.firstVisitAt ?? null,
      lastVisitAt: install.get(r.id)?.lastVisitAt ?? null,
      refusedHosts: install.get(r.id)?.refusedHosts ?? [],
    })),
  };
}
