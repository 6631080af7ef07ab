import type { Deps } from '../../deps.js';
import { announce } from './announce.js';
import { siteConditions } from './conditions.js';
import { nextConditionState, type ConditionState } from './rules.js';

/**
 * One evaluation of every alert (the `alerts_evaluate` job, each minute): each site's conditions
 * are read once, each alert's states moved by `nextConditionState`, and every start or end not
 * yet announced is announced. An announcement that fails is tried again at the next evaluation;
 * a start is always said before its end.
 */
export interface AlertOptions {
  /** An alert ends once its condition has been clear this long (default 30 minutes). */
  clearAfterMs: number;
  /** Sends failing this long start an alert (default 15 minutes). */
  failingForMs: number;
}
export const DEFAULT_ALERT_OPTIONS: AlertOptions = { clearAfterMs: 30 * 60_000, failingForMs: 15 * 60_000 };

interface StateRow {
  alert_id: string;
  condition: string;
  active: boolean;
  detail: string;
  started_at: Date;
  clear_since: Date | null;
  ended_at: Date | null;
  start_announced_at: Date | null;
  end_announced_at: Date | null;
}

export async function evaluateAlerts(
  deps: Pick<Deps, 'pool' | 'box' | 'config' | 'log'>,
  now: Date,
  opts: AlertOptions = DEFAULT_ALERT_OPTIONS,
): Promise<{ started: number; ended: number; announced: number; failed: number }> {
  const out = { started: 0, ended: 0, announced: 0, failed: 0 };
  const { rows: alerts } = await deps.pool.query<{
    id: string;
    site_id: string;
    site_name: string;
    telegram_chat_id: string | null;
    webhook_url: string | null;
  }>(
    `SELECT a.id, a.site_id, s.name AS site_name, a.telegram_chat_id::text, a.webhook_url
     FROM alerts a JOIN sites s ON s.id = a.site_id WHERE a.removed_at IS NULL ORDER BY a.site_id, a.id`,
  );
  const bySite = new Map<string, typeof alerts>();
  for (const a of alerts) bySite.set(a.site_id, [...(bySite.get(a.site_id) ?? []), a]);
  for (const [siteId, siteAlerts] of bySite) {
    const holding = new Map(
      (await siteConditions(deps.pool, siteId, { now, failingForMs: opts.failingForMs })).map((c) => [
        c.key,
        c.detail,
      ]),
    );
    for (const alert of siteAlerts) {
      const { rows: states } = await deps.pool.query<StateRow>(
        'SELECT * FROM alert_states WHERE alert_id = $1',
        [alert.id],
      );
      const known = new Map(states.map((s) => [s.condition, s]));
      for (const key of new Set([...known.keys(), ...holding.keys()])) {
        const row = known.get(key);
        const prev: ConditionState | null = row
          ? {
              active: row.active,
              startedAt: row.started_at,
              clearSince: row.clear_since,
              endedAt: row.ended_at,
            }
          : null;
        const { state, transition } = nextConditionState(prev, holding.has(key), now, opts.clearAfterMs);
        if (state === null || (state === prev && transition === null)) continue;
        const detail = holding.get(key) ?? row?.detail ?? key;
        await deps.pool.query(
          `INSERT INTO alert_states (alert_id, condition, active, detail, started_at, clear_since, ended_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (alert_id, condition) DO UPDATE SET active = $3, detail = $4, started_at = $5, clear_since = $6, ended_at = $7,
             start_announced_at = CASE WHEN $8 = 'start' THEN NULL ELSE alert_states.start_announced_at END,
             end_announced_at = CASE WHEN $8 IN ('start', 'end') THEN NULL ELSE alert_states.end_announced_at END`,
          [
            alert.id,
            key,
            state.active,
            detail,
            state.startedAt,
            state.clearSince,
            state.endedAt,
            transition ?? '',
          ],
        );
        if (transition === 'start') out.started++;
        if (transition === 'end') out.ended++;
      }
      const said = await announcePending(deps, alert, siteId);
      out.announced += said.announced;
      out.failed += said.failed;
    }
  }
  return out;
}

async function announcePending(
  deps: Pick<Deps, 'pool' | 'box' | 'config' | 'log'>,
  alert: { id: string; site_name: string; telegram_chat_id: string | null; webhook_url: string | null },
  siteId: string,
): Promise<{ announced: number; failed: number }> {
  const { rows } = await deps.pool.query<StateRow>(
    `SELECT * FROM alert_states WHERE alert_id = $1
       AND (start_announced_at IS NULL OR (ended_at IS NOT NULL AND end_announced_at IS NULL))
     ORDER BY started_at`,
    [alert.id],
  );
  let announced = 0;
  let failed = 0;
  for (const s of rows) {
    const phases: ('started' | 'ended')[] = [];
    if (s.start_announced_at === null) phases.push('started');
    if (s.ended_at !== null && s.end_announced_at === null) phases.push('ended');
    for (const phase of phases) {
      const why = await announce(
        deps,
        { telegramChatId: alert.telegram_chat_id, webhookUrl: alert.webhook_url },
        {
          alertId: alert.id,
          siteId,
          siteName: alert.site_name,
          condition: s.condition,
          detail: s.detail,
          phase,
          startedAt: s.started_at,
          endedAt: s.ended_at,
        },
      );
      if (why !== null) {
        await deps.pool.query(
          'UPDATE alert_states SET last_error = $3 WHERE alert_id = $1 AND condition = $2',
          [alert.id, s.condition, why],
        );
        deps.log.warn(
          { alertId: alert.id, condition: s.condition, reason: why },
          'alert not announced; tried again later',
        );
        failed++;
        break;
      }
      await deps.pool.query(
        `UPDATE alert_states SET last_error = NULL, ${phase === 'started' ? 'start_announced_at' : 'end_announced_at'} = now()
         WHERE alert_id = $1 AND condition = $2`,
        [alert.id, s.condition],
      );
      announced++;
    }
  }
  return { announced, failed };
}
