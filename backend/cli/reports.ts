import { reportsDb } from '../deps.js';
import { requireSite } from '../domain/admin/sites.js';
import { attributionCoverage } from '../domain/reports/coverage.js';
import {
  GROUP_BYS,
  funnelRates,
  funnelReport,
  type FunnelCounts,
  type GroupBy,
} from '../domain/reports/funnel.js';
import { SIGNALS, matchQualityReport } from '../domain/reports/match-quality.js';
import { reportChannel, reportRange } from '../domain/reports/range.js';
import { UsageError, defineCommand } from './command.js';
import { table } from './table.js';

const RANGE_FLAGS = {
  site: { type: 'string', required: true, placeholder: 'SITE', help: 'the site (siteId or websiteId)' },
  from: { type: 'string', placeholder: 'YYYY-MM-DD', help: 'first UTC day (default: 29 days before --to)' },
  to: { type: 'string', placeholder: 'YYYY-MM-DD', help: 'last UTC day, inclusive (default: today)' },
} as const;

const pct = (r: number | null) => (r === null ? '' : `${(r * 100).toFixed(1)} %`);
const money = (v: Record<string, number>) =>
  Object.entries(v)
    .map(([c, n]) => `${n} ${c}`)
    .join(', ');

function funnelCells(key: string, r: FunnelCounts): string[] {
  return [
    key,
    String(r.visits),
    String(r.inviteClicks),
    pct(funnelRates(r).clickRate),
    String(r.joins),
    String(r.attributedJoins),
    String(r.organicJoins),
    String(r.leaves),
    String(r.retained),
    String(r.conversions),
    money(r.value),
  ];
}

export const reportCommands = [
  defineCommand({
    group: 'report',
    name: 'funnel',
    summary:
      "Prints a site's funnel for a range of UTC days: visits, invite clicks, joins (attributed and organic), leaves, retained joins, conversions and value per currency, grouped by day, utm_source, utm_campaign, channel or platform.",
    flags: {
      ...RANGE_FLAGS,
      'group-by': {
        type: 'string',
        placeholder: GROUP_BYS.join('|'),
        field: 'groupBy',
        help: 'default: day',
      },
      channel: { type: 'string', placeholder: 'CHANNEL_ID', help: 'only this channel of the site' },
    },
    check(v) {
      if (v['group-by'] !== undefined && !(GROUP_BYS as readonly string[]).includes(v['group-by']))
        throw new UsageError(`--group-by must be one of ${GROUP_BYS.join(', ')}`);
    },
    async run({ deps }, v) {
      const site = await requireSite(deps.pool, v.site);
      const range = reportRange({ from: v.from, to: v.to }, deps.now());
      const channelId = await reportChannel(deps.pool, site.id, v.channel ?? null);
      const out = await funnelReport(reportsDb(deps), {
        siteId: site.id,
        ...range,
        groupBy: (v['group-by'] ?? 'day') as GroupBy,
        channelId,
      });
      const head = [
        out.groupBy,
        'visits',
        'invite clicks',
        'click rate',
        'joins',
        'attributed',
        'organic',
        'leaves',
        'retained',
        'conversions',
        'value',
      ];
      const rows = [
        ...out.rows.map((r) => funnelCells(r.key ?? '(none)', r)),
        funnelCells('total', out.totals),
      ];
      return {
        json: { ...out },
        human: `${site.name}, ${out.from} to ${out.to} (UTC)\n${table(head, rows)}`,
      };
    },
  }),
  defineCommand({
    group: 'report',
    name: 'match-quality',
    summary:
      "Prints, per platform and event type, the events a site delivered in a range and the share carrying each match signal, with what to fix; and each channel's attributed against organic joins.",
    flags: RANGE_FLAGS,
    async run({ deps }, v) {
      const site = await requireSite(deps.pool, v.site);
      const range = reportRange({ from: v.from, to: v.to }, deps.now());
      const rows = await matchQualityReport(reportsDb(deps), { siteId: site.id, ...range });
      const coverage = await attributionCoverage(reportsDb(deps), { siteId: site.id, ...range });
      const share = (n: number) => `${Math.round(n * 100)} %`;
      const lines = [
        `${site.name}, ${range.from} to ${range.to} (UTC)`,
        table(
          ['platform', 'event', 'sent', ...SIGNALS],
          rows.map((r) => [
            r.platform,
            r.eventType,
            String(r.sent),
            ...SIGNALS.map((s) => share(r.shares[s])),
          ]),
        ),
        ...rows.flatMap((r) => r.advice.map((a) => `${r.platform} ${r.eventType}: ${a}`)),
        '',
        table(
          ['channel', 'attributed joins', 'organic joins', 'attributed share'],
          coverage.map((c) => [
            c.title,
            String(c.attributedJoins),
            String(c.organicJoins),
            c.share === null ? '' : share(c.share),
          ]),
        ),
        ...coverage.flatMap((c) => (c.warning ? [`${c.title}: ${c.warning}`] : [])),
      ];
      return { json: { ...range, rows, coverage }, human: lines.join('\n') };
    },
  }),
];
