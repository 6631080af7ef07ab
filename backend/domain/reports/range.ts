import { ApiError } from '../../errors.js';
import type { ApiCaller } from '../conversions/site-scope.js';
import { resolveSiteRef, type SiteRef } from '../conversions/site-scope.js';
import type { Queryable } from '../../db/pool.js';

/** The longest range a report covers: two years of days. */
const MAX_RANGE_DAYS = 731;
/** Without `from`, a report covers the last 30 days up to `to`. */
const DEFAULT_RANGE_DAYS = 30;

const DAY_MS = 86_400_000;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** The first day PostgreSQL's `date` and ISO 8601 share: year 0 is refused by the database. */
const FIRST_DAY = '0001-01-01';

/** A calendar date written YYYY-MM-DD that exists (no 2026-02-30) and the database can hold (year 1 on). */
function isDate(s: string): boolean {
  if (!DATE.test(s) || s < FIRST_DAY) return false;
  const t = Date.parse(`${s}T00:00:00Z`);
  return Number.isFinite(t) && new Date(t).toISOString().slice(0, 10) === s;
}

export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

function shift(day: string, days: number): string {
  return utcDay(new Date(Date.parse(`${day}T00:00:00Z`) + days * DAY_MS));
}

/**
 * A report's UTC day range: `to` defaults to today, `from` to 30 days before it (inclusive);
 * `from` after `to` or a range over MAX_RANGE_DAYS is refused.
 */
export function reportRange(
  q: { from?: string | null; to?: string | null },
  now: Date,
): { from: string; to: string } {
  for (const [path, v] of [
    ['from', q.from],
    ['to', q.to],
  ] as const) {
    if (v != null && !isDate(v))
      throw new ApiError('VALIDATION_FAILED', `${path} must be a date written YYYY-MM-DD`, {
        errors: [{ path, message: 'must be a date written YYYY-MM-DD' }],
      });
  }
  const to = q.to ?? utcDay(now);
  const defaultFrom = shift(to, -(DEFAULT_RANGE_DAYS - 1));
  // The 30 days before an early `to` may reach past year 1, which the database cannot hold.
  const from = q.from ?? (isDate(defaultFrom) ? defaultFrom : FIRST_DAY);
  if (from > to)
    throw new ApiError('VALIDATION_FAILED', 'from is after to', {
      errors: [{ path: 'from', message: 'must not be after to' }],
    });
  const days = (Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / DAY_MS + 1;
  if (days > MAX_RANGE_DAYS) {
    throw new ApiError('VALIDATION_FAILED', `the range covers ${days} days, at most ${MAX_RANGE_DAYS}`, {
      errors: [{ path: 'from', message: `at most ${MAX_RANGE_DAYS} days before to` }],
    });
  }
  return { from, to };
}

/** The site a report is about: a site key's own, or the one an account key names (required). */
export async function reportSite(db: Queryable, caller: ApiCaller, ref: SiteRef): Promise<string> {
  const siteId = await resolveSiteRef(db, caller, ref);
  if (siteId === null)
    throw new ApiError('SITE_REQUIRED', 'an account key must name the site (siteId or websiteId)', {
      errors: [{ path: 'siteId', message: 'Required' }],
    });
  return siteId;
}

/** A channel filter of a report: one of the site's channels (any other is refused, whoever owns it). */
export async function reportChannel(
  db: Queryable,
  siteId: string,
  channelId: string | null,
): Promise<string | null> {
  if (channelId === null) return null;
  const { rows } = await db.query('SELECT 1 FROM channels WHERE site_id = $1 AND id::text = $2', [
    siteId,
    channelId,
  ]);
  if (rows.length === 0)
    throw new ApiError('VALIDATION_FAILED', 'channelId is not a channel of this site', {
      errors: [{ path: 'channelId', message: 'not a channel of this site' }],
    });
  return channelId;
}

/** The ranges a marketer picks most, as UTC days ending today (the dashboard's shortcuts). */
export function rangePresets(now: Date): { label: string; from: string; to: string }[] {
  const today = utcDay(now);
  const monthStart = `${today.slice(0, 8)}01`;
  const lastMonthEnd = shift(monthStart, -1);
  return [
    { label: 'today', from: today, to: today },
    { label: 'yesterday', from: shift(today, -1), to: shift(today, -1) },
    { label: 'last 7 days', from: shift(today, -6), to: today },
    { label: 'last 30 days', from: shift(today, -29), to: today },
    { label: 'this month', from: monthStart, to: today },
    { label: 'last month', from: `${lastMonthEnd.slice(0, 8)}01`, to: lastMonthEnd },
  ];
}

/**
 * The period a range is compared with: as many days, ending the day before it starts; null when
 * that would begin before year 1.
 */
export function previousRange(r: { from: string; to: string }): { from: string; to: string } | null {
  const days = (Date.parse(`${r.to}T00:00:00Z`) - Date.parse(`${r.from}T00:00:00Z`)) / DAY_MS + 1;
  const to = shift(r.from, -1);
  const from = shift(r.from, -days);
  return isDate(from) && isDate(to) ? { from, to } : null;
}
