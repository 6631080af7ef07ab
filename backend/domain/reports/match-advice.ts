/**
 * What to fix when a share of match signals is low: one plain sentence per weak signal, for the
 * marketer who reads the match-quality report. Pure rules, no I/O.
 */
export interface SignalShares {
  fbc: number;
  fbp: number;
  ip: number;
  userAgent: number;
  email: number;
  phone: number;
  externalId: number;
  clickId: number;
}

/**
 * The signals each platform's payload carries (backend/platforms/*): Meta's CAPI takes them all;
 * TikTok and Snapchat no fbc or fbp; Google takes the click id, hashed e-mail and phone and the
 * landing request's IP and User-Agent, nothing else. A signal a platform never receives is neither
 * counted nor advised for it.
 */
const RECEIVED: Record<string, readonly (keyof SignalShares)[]> = {
  meta: ['fbc', 'fbp', 'ip', 'userAgent', 'email', 'phone', 'externalId', 'clickId'],
  tiktok: ['ip', 'userAgent', 'email', 'phone', 'externalId', 'clickId'],
  snapchat: ['ip', 'userAgent', 'email', 'phone', 'externalId', 'clickId'],
  google: ['ip', 'userAgent', 'email', 'phone', 'clickId'],
};

export function receives(platform: string, signal: keyof SignalShares): boolean {
  return (RECEIVED[platform] ?? RECEIVED.meta!).includes(signal);
}

/**
 * What sent an event: a visit's PageView, a channel join Telegram reported (no e-mail or phone
 * exists for it), or a business event the operator's backend posted (which can carry them).
 */
export type EventKind = 'pageview' | 'join' | 'business';

/** Below this share a signal is called out. */
const LOW_SHARE = 0.6;

const pct = (share: number) => `${Math.round((1 - share) * 100)} %`;

/** The Meta name of an event type, pluralised for a sentence ("Purchases", "PageViews"). */
function plural(eventType: string): string {
  return eventType.endsWith('s') ? eventType : `${eventType}s`;
}

export function matchAdvice(
  platform: string,
  eventType: string,
  s: SignalShares,
  kind: EventKind = eventType === 'PageView' ? 'pageview' : 'business',
): string[] {
  const out: string[] = [];
  const ev = plural(eventType);
  const isPageView = kind !== 'business';
  if (!isPageView && s.email < LOW_SHARE)
    out.push(`${pct(s.email)} of ${ev} carry no e-mail: send \`pii.email\` from your backend.`);
  if (!isPageView && s.phone < LOW_SHARE)
    out.push(
      `${pct(s.phone)} of ${ev} carry no phone number: send \`pii.phone\` (with a country prefix, or set the site's default country).`,
    );
  if (s.ip < LOW_SHARE || s.userAgent < LOW_SHARE) {
    out.push(
      kind === 'business'
        ? `${pct(Math.min(s.ip, s.userAgent))} of ${ev} carry no IP address or User-Agent: send \`clientIp\` and \`userAgent\` with business events, or install the tracker so visits record them.`
        : `${pct(Math.min(s.ip, s.userAgent))} of ${ev} carry no IP address or User-Agent: install the tracker on the landing page so visits record them.`,
    );
  }
  if (platform === 'meta') {
    if (s.fbp < LOW_SHARE)
      out.push(
        `${pct(s.fbp)} of ${ev} carry no fbp: load Meta's pixel on the landing page before the tracker, or pass \`fbp\` to the tracker.`,
      );
    if (s.clickId < LOW_SHARE)
      out.push(
        `${pct(s.clickId)} of ${ev} carry no fbc (click id): keep \`fbclid\` in the ad's landing URL and do not strip query strings on redirects.`,
      );
  } else if (s.clickId < LOW_SHARE) {
    const param =
      { tiktok: '`ttclid`', google: '`gclid` (auto-tagging on)', snapchat: '`ScCid`' }[platform] ??
      'its click id';
    out.push(`${pct(s.clickId)} of ${ev} carry no click id: keep ${param} in the ad's landing URL.`);
  }
  return out;
}
