import type { SecretBox } from '../crypto/secret-box.js';
import type { Queryable } from '../db/pool.js';
import { isSha256Hex, normalizeExternalId, sha256Hex } from '../domain/pii/normalize.js';
import { buildFbc, rawQueryParam } from '../../shared/fbc.js';
import { isRecord } from '../platforms/response.js';
import {
  CONVERSION_EVENT_TYPES,
  HASHED_PII_KEYS,
  pixelConfigSchema,
  type ActionSource,
  type DeliveryEvent,
  type EventType,
  type HashedPii,
  type PixelConfig,
  type Platform,
} from '../platforms/types.js';

/**
 * From a send's subject (a conversion, or a visit for the PageView) to the `DeliveryEvent` the
 * adapters map to each platform's wire format, and from a pixel row to its decrypted config.
 */

/** A send joined to its subject and to the visit that gives it attribution. */
export interface SendSubjectRow {
  send_id: string;
  event_id: string;
  created_at: Date;
  conversion_id: string | null;
  event_type: string | null;
  custom_event_name: string | null;
  /** The business's order id (`orderId`), null without one. */
  order_id: string | null;
  value: number | null;
  currency: string | null;
  content_name: string | null;
  pii_hashed: unknown;
  /** The request's external id, else the lead's at the time the conversion was recorded. */
  external_user_id: string | null;
  /** The lead's external id now (a CRM id given after this conversion was recorded counts too). */
  lead_external_user_id: string | null;
  /** `webhook` (a Telegram join), `api` (the business API) or `tracker`. */
  source: string | null;
  telegram_user_id: number | null;
  event_time: Date | null;
  event_source_url: string | null;
  c_client_ip: string | null;
  c_user_agent: string | null;
  api_visit_override: unknown;
  /** The visit: the send's own (PageView) or the conversion's acquisition visit (warm lead). */
  visit_id: string | null;
  href: string | null;
  referrer: string | null;
  v_client_ip: string | null;
  v_user_agent: string | null;
  fbc: string | null;
  fbp: string | null;
  gclid: string | null;
  gbraid: string | null;
  wbraid: string | null;
  ttclid: string | null;
  sccid: string | null;
  ttp: string | null;
  scid: string | null;
  v_created_at: Date | null;
  /** The visit's kind: `pageview`, `direct_invite`, or `redirect` (a click on `/r/…`, on Capigram's host). */
  v_kind: string | null;
  /** The site's own URL (`site create --url`), and its first domain. */
  site_url: string | null;
  site_domain: string | null;
  /** How the site reports Telegram joins: `website` (default) or `chat`. */
  telegram_action_source: string | null;
  /** The site's Google ad-user-data consent (`GRANTED`/`DENIED`), null when it sets none. */
  google_ad_user_data: string | null;
  /** The business event's own consent (`GRANTED`/`DENIED`), null when it gave none (docs/consent.md). */
  ad_user_data_consent?: string | null;
  ad_personalization_consent?: string | null;
  /** The site's `--limited-data-use`. */
  limited_data_use?: boolean | null;
}

/**
 * The subject columns of the sends `s` read from `from` (the table, or a CTE of its rows such as
 * the claim's), with the joins they need; `extra` adds columns and joins of the caller's.
 */
export function sendSubjectsSql(
  from: string,
  extra: { columns: string; joins: string } = { columns: '', joins: '' },
): string {
  return `
  SELECT s.id AS send_id, s.event_id, s.created_at, s.conversion_id,
         c.event_type, c.custom_event_name, c.order_id, c.value, c.currency, c.content_name, c.pii_hashed, c.external_user_id, c.telegram_user_id, c.event_time,
         c.event_source_url, c.client_ip AS c_client_ip, c.user_agent AS c_user_agent, c.api_visit_override,
         c.source, l.external_user_id AS lead_external_user_id,
         v.id AS visit_id, v.href, v.referrer, v.client_ip AS v_client_ip, v.user_agent AS v_user_agent,
         v.fbc, v.fbp, v.gclid, v.gbraid, v.wbraid, v.ttclid, v.sccid, v.ttp, v.scid, v.created_at AS v_created_at,
         v.kind AS v_kind, st.url AS site_url, st.domains[1] AS site_domain, st.google_ad_user_data, st.telegram_action_source,
         c.ad_user_data_consent, c.ad_personalization_consent, st.limited_data_use${extra.columns}
  FROM ${from} s
  LEFT JOIN conversions c ON c.id = s.conversion_id
  LEFT JOIN leads l ON l.id = c.lead_id
  LEFT JOIN visits v ON v.id = COALESCE(s.visit_id, c.visit_id)
  LEFT JOIN sites st ON st.id = COALESCE(c.site_id, v.site_id)${extra.joins}`;
}

export const SEND_SUBJECT_SQL = `${sendSubjectsSql('sends')}
  WHERE s.id = ANY($1::uuid[])`;

export async function loadSubjects(db: Queryable, sendIds: readonly string[]): Promise<SendSubjectRow[]> {
  if (sendIds.length === 0) return [];
  return (await db.query<SendSubjectRow>(SEND_SUBJECT_SQL, [sendIds])).rows;
}

const CONVERSION_TYPES: ReadonlySet<string> = new Set<EventType>(CONVERSION_EVENT_TYPES);

/** The first non-blank string among the candidates. */
function first(...candidates: unknown[]): string | null {
  for (const c of candidates) if (typeof c === 'string' && c.trim() !== '') return c;
  return null;
}

function field(o: unknown, key: string): unknown {
  return isRecord(o) ? o[key] : undefined;
}

/** Only digests leave the building: anything in `pii_hashed` that is not a SHA-256 hex is dropped. */
export function hashedPiiOf(stored: unknown): HashedPii {
  const out: HashedPii = {};
  for (const key of HASHED_PII_KEYS) {
    const v = field(stored, key);
    if (typeof v === 'string' && isSha256Hex(v)) out[key] = v.toLowerCase();
  }
  return out;
}

/**
 * One identity per lead: every event of a lead carries all its external ids, the CRM's (the
 * request's, else the lead's, normalised as Meta's parameter builder does: lowercase, no
 * whitespace) and the Telegram user id's (the digest of the decimal id, e.g.
 * sha256("777000111")). A join sent before the CRM id was known carries the Telegram id alone;
 * every later event carries both, so the platforms link them.
 */
export function externalIdsFor(
  hashed: HashedPii,
  externalUserIds: readonly (string | null)[],
  telegramUserId: number | null,
): string[] {
  const ids: string[] = [];
  if (hashed.externalId) ids.push(hashed.externalId);
  for (const raw of externalUserIds) {
    const text = raw?.trim();
    if (!text) continue;
    const normal = isSha256Hex(text) ? text.toLowerCase() : normalizeExternalId(text);
    if (normal !== undefined) ids.push(isSha256Hex(normal) ? normal : sha256Hex(normal));
  }
  if (telegramUserId !== null) ids.push(sha256Hex(String(telegramUserId)));
  return [...new Set(ids)];
}

/**
 * `fbc` when the caller sent none: built from an `fbclid` in the visit's URL, timed at the visit
 * (the click's arrival), as Meta's pixel would have on that page.
 */
export function fbcFromHref(href: string | null, visitMs: number | null): string | null {
  if (href === null || visitMs === null) return null;
  const q = href.indexOf('?');
  if (q < 0) return null;
  const fbclid = rawQueryParam(href.slice(q + 1).split('#')[0] ?? '', 'fbclid');
  return fbclid === undefined ? null : buildFbc(fbclid, visitMs);
}

/**
 * The page a visit stands for, as the platforms' `event_source_url`. A click on `/r/…` went from
 * the ad to Capigram's host and on to Telegram: no page of the site was seen, and the `/r/` URL is
 * Capigram's, not the advertiser's domain, which Meta wants the URL to match (its traffic
 * permissions and domain verification read it). Such a visit stands for the site's own URL (else
 * its first domain's root): the event keeps its browser (IP, User-Agent, fbc) and stays a website
 * event on the advertiser's domain. Every other visit's URL is the page it was recorded on.
 */
export function visitPageUrl(
  row: Pick<SendSubjectRow, 'v_kind' | 'href' | 'site_url' | 'site_domain'>,
): string | null {
  if (row.v_kind !== 'redirect') return row.href;
  return row.site_url ?? (row.site_domain ? `https://${row.site_domain}/` : null);
}

/**
 * The page URL the conversion was recorded with, unless it is only its visit's `/r/` URL: a join
 * (or an entry's event) takes its visit's `href` as its page, and a click on `/r/…` has
 * Capigram's URL there, which stands for the site's own (`visitPageUrl`). A URL of its own (a
 * business event's `eventSourceUrl`) is kept.
 */
export function conversionPageUrl(
  row: Pick<SendSubjectRow, 'event_source_url' | 'v_kind' | 'href'>,
): string | null {
  if (row.v_kind === 'redirect' && row.event_source_url === row.href) return null;
  return row.event_source_url;
}

/**
 * How the conversion is reported (Meta's `action_source`): a Telegram join as the site chooses
 * (`website`, the default, with its visit's page and browser; `chat`, what it literally is); any
 * other event with a page URL and a User-Agent as a website event; one without a browser (a CRM
 * stage, a purchase recorded by a backend) as `system_generated`, which every platform accepts
 * without a page or a browser.
 */
export function actionSourceFor(
  source: string | null,
  telegramSetting: string | null,
  hasBrowser: boolean,
): ActionSource {
  if (source === 'webhook') return telegramSetting === 'chat' || !hasBrowser ? 'chat' : 'website';
  return hasBrowser ? 'website' : 'system_generated';
}

/**
 * A conversion takes its attribution (click ids, fbc/fbp, IP, User-Agent, landing URL) from its
 * acquisition visit (warm lead) or from the `apiVisitOverride` its caller supplied (cold lead);
 * the visit wins field by field, and the conversion's own IP, User-Agent and page URL (forwarded
 * with the business request) win over both. A visit is its own PageView, timed at its arrival.
 */
export function eventFromRow(row: SendSubjectRow): DeliveryEvent {
  if (row.conversion_id === null) {
    if (row.visit_id === null || row.v_created_at === null)
      throw new Error(`send ${row.send_id} has no subject`);
    return {
      eventId: row.event_id,
      eventType: 'PageView',
      eventTimeMs: row.v_created_at.getTime(),
      eventSourceUrl: visitPageUrl(row),
      referrer: row.referrer,
      clientIp: row.v_client_ip,
      userAgent: row.v_user_agent,
      fbc: row.fbc ?? fbcFromHref(row.href, row.v_created_at.getTime()),
      fbp: row.fbp,
      gclid: row.gclid,
      gbraid: row.gbraid,
      wbraid: row.wbraid,
      landingIp: row.v_client_ip,
      ttclid: row.ttclid,
      sccid: row.sccid,
      ttp: row.ttp,
      scid: row.scid,
      hashed: {},
      ...limitedDataUseOf(row),
    };
  }
  if (row.event_type === null || !CONVERSION_TYPES.has(row.event_type) || row.event_time === null) {
    throw new Error(`send ${row.send_id}: conversion ${row.conversion_id} has no usable event type or time`);
  }
  const o = row.api_visit_override;
  const eventSourceUrl = first(conversionPageUrl(row), visitPageUrl(row), field(o, 'eventSourceUrl'));
  // Without consent to the use of the user's data, no PII, IP or User-Agent of the event leaves,
  // for any platform: it is withheld here, before any adapter sees the event (docs/consent.md).
  const withheld = consentOf(row.ad_user_data_consent ?? null) === 'DENIED';
  const userAgent = withheld ? null : first(row.c_user_agent, row.v_user_agent, field(o, 'userAgent'));
  const hashed = withheld ? {} : hashedPiiOf(row.pii_hashed);
  return {
    eventId: row.event_id,
    eventType: row.event_type as EventType,
    customEventName: row.custom_event_name,
    eventTimeMs: row.event_time.getTime(),
    actionSource: actionSourceFor(
      row.source,
      row.telegram_action_source,
      eventSourceUrl !== null && userAgent !== null,
    ),
    eventSourceUrl,
    referrer: row.referrer,
    clientIp: withheld ? null : first(row.c_client_ip, row.v_client_ip, field(o, 'clientIp')),
    userAgent,
    fbc: first(row.fbc, field(o, 'fbc'), fbcFromHref(row.href, row.v_created_at?.getTime() ?? null)),
    fbp: first(row.fbp, field(o, 'fbp')),
    gclid: first(row.gclid, field(o, 'gclid')),
    gbraid: first(row.gbraid, field(o, 'gbraid')),
    wbraid: first(row.wbraid, field(o, 'wbraid')),
    // Google wants the device's IP on the landing page: the visit's (or a cold lead's supplied one).
    landingIp: withheld ? null : first(row.v_client_ip, field(o, 'clientIp')),
    ttclid: first(row.ttclid, field(o, 'ttclid')),
    sccid: first(row.sccid, field(o, 'sccid')),
    ttp: first(row.ttp, field(o, 'ttp')),
    scid: first(row.scid, field(o, 'scid')),
    hashed,
    externalIds: withheld
      ? []
      : externalIdsFor(hashed, [row.external_user_id, row.lead_external_user_id], row.telegram_user_id),
    value: row.value,
    currency: row.currency === null ? null : row.currency.trim(),
    contentName: row.content_name,
    orderId: row.order_id ?? row.conversion_id,
    businessOrderId: row.order_id,
    adUserDataConsent: consentOf(row.ad_user_data_consent ?? null) ?? consentOf(row.google_ad_user_data),
    adPersonalizationConsent: consentOf(row.ad_personalization_consent ?? null),
    ...limitedDataUseOf(row),
  };
}

/** Set only when the site asks for it, so an event of any other site reads as before. */
function limitedDataUseOf(row: Pick<SendSubjectRow, 'limited_data_use'>): { limitedDataUse?: true } {
  return row.limited_data_use === true ? { limitedDataUse: true } : {};
}

function consentOf(v: string | null): 'GRANTED' | 'DENIED' | null {
  return v === 'GRANTED' || v === 'DENIED' ? v : null;
}

export interface PixelRow {
  id: string;
  platform: Platform;
  public_config: unknown;
  secrets_enc: string;
  test_event_code: string | null;
  active: boolean;
}

export type LoadedPixel =
  | { id: string; platform: Platform; active: boolean; config: PixelConfig }
  | { id: string; platform: Platform; active: boolean; error: string };

/** The pixel's public config, its decrypted secrets and its test event code as one config. */
export function pixelConfigOf(row: PixelRow, box: Pick<SecretBox, 'open'>): LoadedPixel {
  const base = { id: row.id, platform: row.platform, active: row.active };
  let secrets: unknown;
  try {
    secrets = JSON.parse(box.open(row.secrets_enc));
  } catch {
    return { ...base, error: 'pixel credentials cannot be decrypted (was SECRET_KEY changed?)' };
  }
  const parsed = pixelConfigSchema.safeParse({
    ...(isRecord(row.public_config) ? row.public_config : {}),
    ...(isRecord(secrets) ? secrets : {}),
    platform: row.platform,
    testEventCode: row.test_event_code,
  });
  if (!parsed.success)
    return {
      ...base,
      error: `pixel configuration is incomplete: ${parsed.error.issues.map((i) => i.path.join('.')).join(', ')}`,
    };
  return { ...base, config: parsed.data };
}

export async function loadPixel(
  db: Queryable,
  box: Pick<SecretBox, 'open'>,
  pixelId: string,
): Promise<LoadedPixel | null> {
  const { rows } = await db.query<PixelRow>(
    'SELECT id, platform, public_config, secrets_enc, test_event_code, active FROM pixels WHERE id = $1',
    [pixelId],
  );
  return rows[0] ? pixelConfigOf(rows[0], box) : null;
}
