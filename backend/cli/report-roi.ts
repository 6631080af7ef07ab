import { reportsDb } from '../deps.js';
import { requireSite } from '../domain/admin/sites.js';
import { reportRange, utcDay } from '../domain/reports/range.js';
import { ROI_GROUP_BYS, roiReport, type RoiGroupBy, type RoiRow } from '../domain/reports/roi.js';
import type { Money } from '../domain/spend/roi-rules.js';
import { UsageError, defineCommand } from './command.js';
import { table } from './table.js';

const money = (v: Money) =>
  Object.entries(v)
    .map(([c, n]) => `${n} ${c}`)
    .join(', ');
const count = (n: number | null) => (n === null ? '' : String(n));

function cells(key: string, r: Omit<RoiRow, 'key' | 'platform' | 'campaignId' | 'campaignName'>): string[] {
  return [
    key,
    money(r.spend),
    String(r.clicks),
    String(r.visits),
    String(r.joins),
    money(r.costPerJoin),
    count(r.retained.d7),
    money(r.costPerRetained.d7),
    count(r.retained.d30),
    money(r.costPerRetained.d30),
    String(r.conversions),
    money(r.value),
    r.roas === null ? '' : String(r.roas),
  ];
}

function label(r: RoiRow, groupBy: RoiGroupBy): string {
  if (groupBy !== 'campaign') return r.key ?? '(none)';
  if (r.campaignId === null) return '(no campaign)';
  return `${r.platform ?? '?'} ${r.campaignId}${r.campaignName ? ` ${r.campaignName}` : ''}`;
}

export const roiReportCommands = [
  defineCommand({
    group: 'report',
    name: 'roi',
    summary:
      "Prints a site's ad spend beside its visits, joins, retained joins (7 and 30 days), conversions and value for a range of days, with cost per join, cost per retained join and ROAS, per campaign, day or platform; money per currency, never mixed. Lists campaigns with spend and no visits, and campaign keys with visits and no spend.",
    flags: {
      site: { type: 'string', required: true, placeholder: 'SITE', help: 'the site (siteId or websiteId)' },
      from: { type: 'string', placeholder: 'YYYY-MM-DD', help: 'first day (default: 29 days before --to)' },
      to: { type: 'string', placeholder: 'YYYY-MM-DD', help: 'last day, inclusive (default: today, UTC)' },
      'group-by': {
        type: 'string',
        placeholder: ROI_GROUP_BYS.join('|'),
        field: 'groupBy',
        help: 'default: campaign',
      },
    },
    check(v) {
      if (v['group-by'] !== undefined && !(ROI_GROUP_BYS as readonly string[]).includes(v['group-by']))
        throw new UsageError(`--group-by must be one of ${ROI_GROUP_BYS.join(', ')}`);
    },
    async run({ deps }, v) {
      const site = await requireSite(deps.pool, v.site);
      const now = deps.now();
      const range = reportRange({ from: v.from, to: v.to }, now);
      const groupBy = (v['group-by'] ?? 'campaign') as RoiGroupBy;
      const out = await roiReport(reportsDb(deps), {
        siteId: site.id,
        ...range,
        groupBy,
        today: utcDay(now),
      });
      const head = [
        groupBy,
        'spend',
        'clicks',
        'visits',
        'joins',
        'per join',
        'retained d7',
        'per retained d7',
        'retained d30',
        'per retained d30',
        'conversions',
        'value',
        'ROAS',
      ];
      const rows = [...out.rows.map((r) => cells(label(r, groupBy), r)), cells('total', out.totals)];
      const warnings = out.warnings.map((w) =>
        w.kind === 'spend_without_visits'
          ? `warning: ${w.platform} campaign ${w.campaignId}${w.campaignName ? ` (${w.campaignName})` : ''} spent ${money(w.spend)} and has no visits: check its URL parameters (docs/spend.md)`
          : `warning: ${w.visits} visits carry campaign ${w.campaignId} and no spend was imported for it`,
      );
      return {
        json: { ...out },
        human: [`${site.name}, ${out.from} to ${out.to}`, table(head, rows), ...warnings].join('\n'),
      };
    },
  }),
];
