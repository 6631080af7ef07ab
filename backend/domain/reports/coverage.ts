import type { Queryable } from '../../db/pool.js';
import { funnelReport } from './funnel.js';

/**
 * Attribution coverage per channel: joins Capigram traced to a visit against organic ones. When
 * organic joins dominate a public channel the likely cause is Telegram itself: its apps join a
 * public channel through its username even from an invite link, so the link (and the click) is lost.
 */
export interface ChannelCoverage {
  channelId: string;
  title: string;
  isPublic: boolean | null;
  attributedJoins: number;
  organicJoins: number;
  /** attributed / all joins; null without joins. */
  share: number | null;
  warning?: string;
}

const PUBLIC_CHANNEL_WARNING =
  'Most joins of this public channel are organic: Telegram joins public channels through their username even from an invite link, so the click is lost. Send visitors through the bot (an entry) or make the channel private.';
const ORGANIC_WARNING =
  'Most joins of this channel are organic: check that ads and pages link to Capigram (tracker, proxy or /r/ links), not to the channel directly.';

export async function attributionCoverage(
  db: Queryable,
  q: { siteId: string; from: string; to: string },
): Promise<ChannelCoverage[]> {
  const funnel = await funnelReport(db, { ...q, groupBy: 'channel' });
  const { rows: channels } = await db.query<{ id: string; title: string; chat_is_public: boolean | null }>(
    'SELECT id, title, chat_is_public FROM channels WHERE site_id = $1 AND active ORDER BY funnel_order, created_at',
    [q.siteId],
  );
  return channels.map((ch) => {
    const row = funnel.rows.find((r) => r.key === ch.id);
    const attributedJoins = row?.attributedJoins ?? 0;
    const organicJoins = row?.organicJoins ?? 0;
    const all = attributedJoins + organicJoins;
    const out: ChannelCoverage = {
      channelId: ch.id,
      title: ch.title,
      isPublic: ch.chat_is_public,
      attributedJoins,
      organicJoins,
      share: all === 0 ? null : Math.round((attributedJoins / all) * 10_000) / 10_000,
    };
    if (organicJoins > attributedJoins)
      out.warning = ch.chat_is_public ? PUBLIC_CHANNEL_WARNING : ORGANIC_WARNING;
    return out;
  });
}
