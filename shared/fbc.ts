/**
 * Meta's click id cookie format, `fb.<subdomainIndex>.<creationTimeMs>.<fbclid>`.
 *
 * Meta matches `fbc` against the click it issued, so the fbclid is carried byte for byte: it is
 * taken from the raw query string (never percent-decoded, never case-folded) and written back as is.
 */

/** Longest `fbc` the tracker wire accepts; longer ones are dropped rather than truncated. */
export const MAX_FBC_LENGTH = 512;

export interface ParsedFbc {
  subdomainIndex: number;
  createdAtMs: number;
  fbclid: string;
}

/**
 * Builds `fb.1.<ms>.<fbclid>`. Subdomain index 1 means "set on the registrable domain's host",
 * which is what a server-side builder should claim (Meta's guidance for server-set cookies).
 */
export function buildFbc(fbclid: string, nowMs: number): string {
  return `fb.1.${Math.trunc(nowMs)}.${fbclid}`;
}

/** Splits an `fbc`/`_fbc` value; undefined when it is not in Meta's format. */
export function parseFbc(value: string | undefined): ParsedFbc | undefined {
  if (value === undefined) return undefined;
  const match = /^fb\.(\d)\.(\d{1,15})\.(.+)$/s.exec(value);
  if (match === null) return undefined;
  const [, index, created, fbclid] = match;
  if (index === undefined || created === undefined || fbclid === undefined) return undefined;
  return { subdomainIndex: Number(index), createdAtMs: Number(created), fbclid };
}

/**
 * Whether an existing `_fbc` records exactly this fbclid (so it must be kept, not rebuilt). Meta's
 * newer pixel and parameter builder append `.<appendix>` (e.g. `.AQ…`) after the fbclid; such a
 * cookie records the same click, and rebuilding it would change the click time Meta attributes on.
 */
export function fbcMatchesFbclid(fbc: string | undefined, fbclid: string): boolean {
  const recorded = parseFbc(fbc)?.fbclid;
  return recorded !== undefined && (recorded === fbclid || recorded.startsWith(`${fbclid}.`));
}

/**
 * The value of a query parameter exactly as it appears in the URL (no `+`→space, no `%XX`
 * decoding). `search` may start with `?`. Returns the first non-empty occurrence.
 */
export function rawQueryParam(search: string, name: string): string | undefined {
  const query = search.startsWith('?') ? search.slice(1) : search;
  for (const pair of query.split('&')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    if (pair.slice(0, eq) === name) {
      const value = pair.slice(eq + 1);
      if (value !== '') return value;
    }
  }
  return undefined;
}

export interface FbcDecision {
  /** The `fbc` to report, if any. */
  fbc: string | undefined;
  /** True when `fbc` was built now from the URL's fbclid (and should be stored as `_fbc`). */
  built: boolean;
}

/**
 * The reverse-proxy rule: keep the browser's `_fbc` unless the URL carries an fbclid it does not
 * record; then build a fresh one from that fbclid.
 */
export function decideFbc(
  cookieFbc: string | undefined,
  fbclid: string | undefined,
  nowMs: number,
): FbcDecision {
  const existing =
    cookieFbc !== undefined && cookieFbc !== '' && cookieFbc.length <= MAX_FBC_LENGTH ? cookieFbc : undefined;
  if (fbclid === undefined || fbclid === '' || fbcMatchesFbclid(existing, fbclid)) {
    return { fbc: existing, built: false };
  }
  const fbc = buildFbc(fbclid, nowMs);
  if (fbc.length > MAX_FBC_LENGTH) return { fbc: existing, built: false };
  return { fbc, built: true };
}
