import type { Queryable } from '../../db/pool.js';
import { type EventKind, matchAdvice, type SignalShares } from './match-advice.js';

/**
 * Match quality (docs/reports.md): per platform and event type, the events delivered in a range
 * and the share of them carrying each signal the platforms match people on. The signals are read
 * with the precedence the event builder (delivery/event-builder.ts) sends them with: the
 * conversion's own IP and User-Agent, else the visit's, else a cold lead's supplied ones.
 * Every conversion carries an external id (the digest of the Telegram user id is always added);
 * a PageView never does.
 */
export const SIGNALS = ['fbc', 'fbp', 'ip', 'userAgent', 'email', 'phone', 'externalId', 'clickId'] as const;
type Signal = (typeof SIGNALS)[number];

export interface MatchQualityRow {
  platform: string;
  eventType: string;
  sent: number;
  /** Share (0 to 1) of the sent events carrying each signal. */
  shares: SignalShares;
  /** What to fix, one sentence per weak signal. */
  advice: string[];
}

// A value counts when it is not blank, as the event builder's `first()` has it.
const has = (sql: string) => `NULLIF(btrim(${sql}), '') IS NOT NULL`;
const o = (k: string) => `(c.api_visit_override ->> '${k}')`;

const FBC = `(${has(`v.fbc`)} OR ${has(o('fbc'))} OR v.href ~ '[?&]fbclid=')`;
const CLICK_ID = `CASE s.platform
  WHEN 'meta' THEN ${FBC}
  WHEN 'tiktok' THEN ${has('v.ttclid')} OR ${has(o('ttclid'))}
  WHEN 'google' THEN ${has('v.gclid')} OR ${has('v.gbraid')} OR ${has('v.wbraid')} OR ${has(o('gclid'))} OR ${has(o('gbraid'))} OR ${has(o('wbraid'))}
  WHEN 'snapchat' THEN ${has('v.sccid')} OR ${has(o('sccid'))}
END`;

export async function matchQualityReport(
  db: Queryable,
  q: { siteId: string; from: string; to: string },
): Promise<MatchQualityRow[]> {
  const { rows } = await db.query<
    { platform: string; event_type: string; kind: EventKind; sent: number } & Record<Signal, number>
  >(
    `SELECT s.platform,
            CASE WHEN s.conversion_id IS NULL THEN 'PageView' ELSE c.event_type END AS event_type,
            CASE WHEN s.conversion_id IS NULL THEN 'pageview' WHEN c.source = 'webhook' THEN 'join' ELSE 'business' END AS kind,
            count(*)::bigint AS sent,
            count(*) FILTER (WHERE ${FBC})::bigint AS fbc,
            count(*) FILTER (WHERE ${has('v.fbp')} OR ${has(o('fbp'))})::bigint AS fbp,
            count(*) FILTER (WHERE ${has('c.client_ip')} OR ${has('v.client_ip')} OR ${has(o('clientIp'))})::bigint AS ip,
            count(*) FILTER (WHERE ${has('c.user_agent')} OR ${has('v.user_agent')} OR ${has(o('userAgent'))})::bigint AS "userAgent",
            count(*) FILTER (WHERE c.pii_hashed ? 'em')::bigint AS email,
            count(*) FILTER (WHERE c.pii_hashed ? 'ph')::bigint AS phone,
            count(*) FILTER (WHERE c.id IS NOT NULL)::bigint AS "externalId",
            count(*) FILTER (WHERE ${CLICK_ID})::bigint AS "clickId"
     FROM pixels p
     JOIN sends s ON s.pixel_id = p.id
     LEFT JOIN conversions c ON c.id = s.conversion_id
     LEFT JOIN visits v ON v.id = COALESCE(s.visit_id, c.visit_id)
     WHERE p.site_id = $1 AND s.status = 'sent'
       AND s.created_at >= ($2::date::timestamp AT TIME ZONE 'UTC') AND s.created_at < (($3::date + 1)::timestamp AT TIME ZONE 'UTC')
     GROUP BY 1, 2, 3
     ORDER BY 1, 4 DESC, 2, 3`,
    [q.siteId, q.from, q.to],
  );
  return rows.map((r) => {
    const shares = Object.fromEntries(
      SIGNALS.map((k) => [k, r.sent === 0 ? 0 : Math.round((r[k] / r.sent) * 10_000) / 10_000]),
    ) as unknown as SignalShares;
    return {
      platform: r.platform,
      eventType: r.event_type,
      sent: r.sent,
      shares,
      advice: matchAdvice(r.platform, r.event_type, shares, r.kind),
    };
  });
}
