import type { Deps } from '../../deps.js';
import { describePostFailure, postOutbound } from '../../outbound/post.js';
import { createTelegramClient } from '../../telegram/client.js';

/**
 * Where an alert's start and end are said: a Telegram chat, through the account's own bot (the
 * bot of the site's channels first: the team already talks to it), or a webhook URL under the
 * outbound rule, as JSON whose `text` field is what Slack- and Mattermost-style incoming webhooks
 * show.
 */
export interface Announcement {
  alertId: string;
  siteId: string;
  siteName: string;
  condition: string;
  detail: string;
  phase: 'started' | 'ended';
  startedAt: Date;
  endedAt: Date | null;
}

export interface AlertTarget {
  telegramChatId: string | null;
  webhookUrl: string | null;
}

export function announcementText(a: Announcement): string {
  return a.phase === 'started'
    ? `⚠️ Capigram, site "${a.siteName}": ${a.detail}`
    : `✅ Capigram, site "${a.siteName}": resolved: ${a.detail.replace(/ \(.*\)$/, '')} (since ${a.startedAt.toISOString()})`;
}

/** Says one announcement; null when it was taken, else why not. */
export async function announce(
  deps: Pick<Deps, 'pool' | 'box' | 'config'>,
  target: AlertTarget,
  a: Announcement,
): Promise<string | null> {
  const text = announcementText(a);
  if (target.telegramChatId !== null) {
    const { rows } = await deps.pool.query<{ token_enc: string }>(
      `SELECT b.token_enc FROM bots b JOIN sites s ON s.account_id = b.account_id
       WHERE s.id = $1 AND b.removed_at IS NULL
       ORDER BY EXISTS (SELECT 1 FROM channels c WHERE c.site_id = s.id AND c.bot_id = b.id) DESC, b.created_at
       LIMIT 1`,
      [a.siteId],
    );
    const bot = rows[0];
    if (!bot) return 'the account has no bot to send the alert with';
    const tg = createTelegramClient({
      baseUrl: deps.config.TELEGRAM_API_URL,
      token: deps.box.open(bot.token_enc),
    });
    try {
      await tg.sendMessage({
        chat_id: target.telegramChatId,
        text,
        link_preview_options: { is_disabled: true },
      });
      return null;
    } catch (err) {
      return `Telegram: ${(err as Error).message}`;
    }
  }
  const body = JSON.stringify({
    text,
    alert: {
      alertId: a.alertId,
      siteId: a.siteId,
      condition: a.condition,
      detail: a.detail,
      phase: a.phase,
      startedAt: a.startedAt.toISOString(),
      endedAt: a.endedAt?.toISOString() ?? null,
    },
  });
  try {
    const res = await postOutbound(
      target.webhookUrl!,
      {
        headers: { 'content-type': 'application/json', 'user-agent': 'Capigram-Alerts/1' },
        body,
        timeoutMs: 10_000,
      },
      { allowPrivate: deps.config.OUTBOUND_ALLOW_PRIVATE },
    );
    return res.status >= 200 && res.status < 300 ? null : `HTTP ${res.status}`;
  } catch (err) {
    return describePostFailure(err);
  }
}
