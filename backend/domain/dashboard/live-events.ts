import type { Queryable } from '../../db/pool.js';
import { pixelLabel } from '../reports/pixel-health.js';

/**
 * The events last sent to each pixel of a site, newest first, with what the platform answered: the
 * dashboard's live view, like an ad platform's "test events" page. Read from `sends` alone (and
 * the conversion's event name): nothing of the person is read, so nothing of them can be shown.
 */
export interface LiveEvent {
  at: Date;
  eventName: string;
  status: string;
  attempts: number;
  /** The platform's answer: its summary when sent, the error or the reason it was skipped otherwise. */
  answer: string | null;
  testMode: boolean;
}

export interface PixelEvents {
  pixelId: string;
  platform: string;
  label: string;
  events: LiveEvent[];
}

/** Long answers are cut: the view is a glance, `sends list` gives the whole of one. */
const ANSWER_CHARS = 300;

export function answerOf(r: {
  status: string;
  last_error: string | null;
  skip_reason: string | null;
  response_summary: unknown;
}): string | null {
  const text =
    r.status === 'sent' && r.response_summary != null
      ? JSON.stringify(r.response_summary)
      : (r.last_error ??
        r.skip_reason ??
        (r.response_summary == null ? null : JSON.stringify(r.response_summary)));
  return text === null || text.length <= ANSWER_CHARS ? text : `${text.slice(0, ANSWER_CHARS - 1)}…`;
}

export async function liveEvents(db: Queryable, siteId: string, perPixel: number): Promise<PixelEvents[]> {
  const { rows } = await db.query<{
    pixel_id: string;
    platform: string;
    public_config: Record<string, unknown>;
    at: Date | null;
    event_name: string | null;
    status: string | null;
    attempts: number | null;
    last_error: string | null;
    skip_reason: string | null;
    response_summary: unknown;
    test_mode: boolean;
  }>(
    `SELECT p.id AS pixel_id, p.platform, p.public_config,
            s.at, s.event_name, s.status, s.attempts, s.last_error, s.skip_reason, s.response_summary,
            p.test_event_code IS NOT NULL AS test_mode
     FROM pixels p
     LEFT JOIN LATERAL (
       SELECT COALESCE(s.sent_at, s.updated_at) AS at, COALESCE(c.event_type, 'PageView') AS event_name,
              s.status, s.attempts, s.last_error, s.skip_reason, s.response_summary, s.created_at
       FROM sends s LEFT JOIN conversions c ON c.id = s.conversion_id
       WHERE s.pixel_id = p.id
       ORDER BY s.created_at DESC LIMIT $2
     ) s ON true
     WHERE p.site_id = $1
     ORDER BY p.platform, p.id, s.created_at DESC`,
    [siteId, perPixel],
  );
  const out = new Map<string, PixelEvents>();
  for (const r of rows) {
    let p = out.get(r.pixel_id);
    if (!p)
      out.set(
        r.pixel_id,
        (p = {
          pixelId: r.pixel_id,
          platform: r.platform,
          label: pixelLabel(r.platform, r.public_config),
          events: [],
        }),
      );
    if (r.at === null || r.status === null) continue;
    p.events.push({
      at: r.at,
      eventName: r.event_name ?? 'PageView',
      status: r.status,
      attempts: r.attempts ?? 0,
      answer: answerOf({ ...r, status: r.status }),
      testMode: r.test_mode,
    });
  }
  return [...out.values()];
}
