/**
 * A visit's campaign key from its landing URL (docs/spend.md): `utm_id`, else the platform's own
 * campaign parameter, else none (the ROI report then matches the visit's `utm_campaign` with a
 * campaign's name). The database computes the same with `visit_campaign_key` (migration 196) when
 * it folds visits; the table test keeps the two alike. An unexpanded macro is no key.
 */
const PARAMETERS: readonly (readonly [string, RegExp])[] = [
  ['utm_id', /^[A-Za-z0-9._~-]+$/],
  // Google adds gad_campaignid to every auto-tagged click; ValueTrack writes {campaignid}.
  ['gad_campaignid', /^[0-9]+$/],
  ['campaignid', /^[0-9]+$/],
  // Meta {{campaign.id}}, TikTok __CAMPAIGN_ID__, Snapchat {{campaign.id}} (a UUID).
  ['fb_campaign_id', /^[0-9]+$/],
  ['tt_campaign_id', /^[0-9]+$/],
  ['sc_campaign_id', /^[0-9a-fA-F-]+$/],
];

/** The first parameter of the list present with a usable value, read from the raw query string. */
export function campaignKeyOf(url: string | null | undefined): string | null {
  if (!url) return null;
  const q = url.indexOf('?');
  if (q < 0) return null;
  const hash = url.indexOf('#', q);
  const pairs = url.slice(q + 1, hash < 0 ? undefined : hash).split('&');
  for (const [name, shape] of PARAMETERS) {
    for (const pair of pairs) {
      const eq = pair.indexOf('=');
      if (eq < 0 || pair.slice(0, eq) !== name) continue;
      const value = pair.slice(eq + 1);
      if (shape.test(value)) return value;
    }
  }
  return null;
}
