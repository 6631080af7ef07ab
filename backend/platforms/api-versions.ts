/**
 * The API versions Capigram knows for each platform whose URLs carry one, with the day each stops
 * answering. A version past its sunset fails every request, so start-up refuses to be configured
 * with one (`config.ts`), and a test fails once a default comes within 60 days of its sunset, long
 * enough before it for a release to move the default.
 *
 * Sources, read on 2026-11-25:
 * - Google Ads: the sunset reminders on the Google Ads developer blog (v19 2026-02-11, v20
 *   2026-06-10, v21 2026-08-05, v22 2026-10-07) and, for later versions, the release schedule
 *   Google published for 2026 ("each major release available for one year"), which gives only a
 *   month: those are marked `projected` and dated the first of that month, the earliest they can
 *   be. The default is the newest version the official client library (`google-ads-node` 25.1.0 on
 *   npm) ships protos for, which is where the request shape in `google.ts` was read.
 * - Meta: the Conversions API (`/{pixel}/events`) is a Marketing API endpoint, and the Marketing
 *   API retires its versions on its own, earlier schedule, not on the Graph API's: the Marketing
 *   API's version table gives v24.0 until 2026-11-10 (an earlier reading said 2026-10-06; Meta
 *   moved it) and v25.0 until 2027-02-23, while the Graph API's table keeps v24.0 until
 *   2028-02-18. So v24.0 and everything older are past. v26.0 (2026-07-29) and v27.0 (2026-11-04)
 *   have no date yet; the default stays v26.0, the version the request shape was checked against,
 *   until v27.0 has been out for a while.
 */

export interface ApiVersion {
  version: string;
  /** First day (UTC) the version no longer answers; null while the platform has not set one. */
  sunset: string | null;
  /** The date is the earliest day of a month the platform announced, not a day it fixed. */
  projected?: true;
}

export const API_VERSIONS = {
  google: [
    { version: 'v19', sunset: '2026-02-11' },
    { version: 'v20', sunset: '2026-06-10' },
    { version: 'v21', sunset: '2026-08-05' },
    { version: 'v22', sunset: '2026-10-07' },
    { version: 'v23', sunset: '2027-02-01', projected: true },
    { version: 'v24', sunset: '2027-05-01', projected: true },
    { version: 'v25', sunset: '2027-08-01', projected: true },
    { version: 'v26', sunset: '2027-11-01', projected: true },
  ],
  // Marketing API dates (see above): a version older than v24.0 is refused as older than the oldest known.
  meta: [
    { version: 'v24.0', sunset: '2026-11-10' },
    { version: 'v25.0', sunset: '2027-02-23' },
    { version: 'v26.0', sunset: null },
    { version: 'v27.0', sunset: null },
  ],
} as const satisfies Record<string, readonly ApiVersion[]>;

export type VersionedPlatform = keyof typeof API_VERSIONS;

export const DEFAULT_API_VERSIONS: Readonly<Record<VersionedPlatform, string>> = {
  google: 'v25',
  meta: 'v26.0',
};

const PLATFORM_NAMES: Record<VersionedPlatform, string> = {
  google: 'Google Ads API',
  meta: 'Meta Marketing API',
};

function numeric(version: string): number[] {
  return version.replace(/^v/, '').split('.').map(Number);
}

function compare(a: string, b: string): number {
  const x = numeric(a);
  const y = numeric(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The known version with the highest number. */
export function newestVersion(platform: VersionedPlatform): ApiVersion {
  const list: readonly ApiVersion[] = API_VERSIONS[platform];
  return list.reduce((a, b) => (compare(b.version, a.version) > 0 ? b : a));
}

export function knownVersion(platform: VersionedPlatform, version: string): ApiVersion | undefined {
  return (API_VERSIONS[platform] as readonly ApiVersion[]).find((v) => v.version === version);
}

/** Days from `now` to the version's sunset (negative once past); undefined when none is set. */
export function daysToSunset(v: ApiVersion, now: Date): number | undefined {
  if (v.sunset === null) return undefined;
  return (Date.parse(`${v.sunset}T00:00:00Z`) - now.getTime()) / 86_400_000;
}

/**
 * Why `version` cannot be used at `now`, or undefined when it can. A version older than every
 * known one is taken as sunset too (the platforms drop old versions; the table keeps the recent
 * ones); a version newer than every known one is allowed, so a release of the platform does not
 * need a release of Capigram.
 */
export function sunsetProblem(platform: VersionedPlatform, version: string, now: Date): string | undefined {
  const newest = newestVersion(platform);
  const name = PLATFORM_NAMES[platform];
  const known = knownVersion(platform, version);
  if (known === undefined) {
    const list: readonly ApiVersion[] = API_VERSIONS[platform];
    const oldest = list[0]!;
    if (compare(version, oldest.version) < 0) {
      return `${name} ${version} is older than ${oldest.version}, which stops working on ${oldest.sunset}; use ${newest.version} (the newest known)`;
    }
    return undefined;
  }
  const days = daysToSunset(known, now);
  if (days !== undefined && days <= 0) {
    return `${name} ${version} was sunset on ${known.sunset}${known.projected ? ' (projected)' : ''} and no longer answers; use ${newest.version} (the newest known)`;
  }
  return undefined;
}
