import { html, raw } from 'hono/html';
import { ROI_GROUP_BYS, type RoiGroupBy, type RoiReport, type RoiRow } from '../../domain/reports/roi.js';
import type { Money } from '../../domain/spend/roi-rules.js';
import { page, type Html } from './views.js';

/**
 * The site's ROI page: the ad spend beside the joins, retention and value (docs/spend.md), as two
 * charts (spend and value per currency by day, cost per join of the campaigns), the table beneath
 * and the warnings about campaign keys. Money is shown per currency, never summed across
 * currencies; each chart draws one series per currency. As on the Reports page, the numbers reach
 * the script as a JSON data block (never executed) and the page has no inline script.
 */
export interface RoiPageData {
  site: { id: string; name: string };
  report: RoiReport;
  byDay: RoiReport;
}

const GROUP_LABELS: Record<RoiGroupBy, string> = {
  campaign: 'campaign',
  day: 'day',
  platform: 'ad platform',
};

function money(v: Money): string {
  const parts = Object.entries(v).sort(([a], [b]) => a.localeCompare(b));
  return parts.length === 0
    ? '–'
    : parts.map(([c, n]) => `${n.toLocaleString('en-US', { maximumFractionDigits: 2 })} ${c}`).join(' · ');
}

const count = (n: number | null) => (n === null ? '–' : String(n));

function label(r: RoiRow, groupBy: RoiGroupBy): Html {
  if (groupBy === 'day') return html`${r.key}`;
  if (groupBy === 'platform') return html`${r.key === 'none' ? 'none (organic or untagged)' : r.key}`;
  if (r.campaignId === null) return html`<span class="muted">no campaign (organic, untagged)</span>`;
  return r.campaignName === null
    ? html`<code>${r.campaignId}</code> <span class="muted">${r.platform ?? ''}</span>`
    : html`${r.campaignName} <span class="muted">${r.platform ?? ''} · <code>${r.campaignId}</code></span>`;
}

function cells(
  name: Html | string,
  r: Omit<RoiRow, 'key' | 'platform' | 'campaignId' | 'campaignName'>,
): Html {
  return html`<td data-label="">${name}</td><td class="num" data-label="spend">${money(r.spend)}</td>
<td class="num" data-label="clicks">${r.clicks}</td><td class="num" data-label="visits">${r.visits}</td>
<td class="num" data-label="joins">${r.joins}</td><td class="num" data-label="cost per join">${money(r.costPerJoin)}</td>
<td class="num" data-label="retained 7 d">${count(r.retained.d7)}</td><td class="num" data-label="per retained 7 d">${money(r.costPerRetained.d7)}</td>
<td class="num" data-label="retained 30 d">${count(r.retained.d30)}</td><td class="num" data-label="per retained 30 d">${money(r.costPerRetained.d30)}</td>
<td class="num" data-label="conversions">${r.conversions}</td><td class="num" data-label="value">${money(r.value)}</td>
<td class="num" data-label="ROAS">${r.roas === null ? '–' : r.roas.toLocaleString('en-US', { maximumFractionDigits: 2 })}</td>`;
}

const HEAD = html`<tr><th></th><th>spend</th><th>clicks</th><th>visits</th><th>joins</th><th>cost per join</th><th>retained 7 d</th><th>per retained 7 d</th><th>retained 30 d</th><th>per retained 30 d</th><th>conversions</th><th>value</th><th>ROAS</th></tr>`;

function dataBlock(value: unknown): Html {
  return html`<script type="application/json" id="roi-data">${raw(JSON.stringify(value).replace(/</g, '\\u003c'))}</script>`;
}

function warning(w: RoiReport['warnings'][number]): Html {
  return w.kind === 'spend_without_visits'
    ? html`<li><span class="warn">${w.platform} campaign ${w.campaignName ?? w.campaignId}</span> (<code>${w.campaignId}</code>) spent ${money(w.spend)} and has no visits: its ads' URLs carry no campaign parameter (see the parameters to set in docs/spend.md).</li>`
    : html`<li><span class="warn">${w.visits} visits</span> carry campaign <code>${w.campaignId}</code>${w.platform ? ` (${w.platform} clicks)` : ''} and no spend was imported for it: add the ad account as a spend source, or check the parameter.</li>`;
}

export function roiPage(d: RoiPageData, session: { formToken: string }): Html {
  const { report: r, site } = d;
  const currencies = (pick: (x: RoiRow) => Money) => [
    ...new Set(d.byDay.rows.flatMap((x) => Object.keys(pick(x)))),
  ];
  const spendCur = currencies((x) => x.spend).sort();
  const valueCur = currencies((x) => x.value).sort();
  const campaigns = r.groupBy === 'campaign' ? r.rows.filter((x) => x.campaignId !== null) : [];
  const joinCur = [...new Set(campaigns.flatMap((x) => Object.keys(x.costPerJoin)))].sort();
  const top = [...campaigns].sort((a, b) => b.joins - a.joins).slice(0, 12);
  const chartData = {
    days: d.byDay.rows.map((x) => x.key),
    spend: Object.fromEntries(spendCur.map((c) => [c, d.byDay.rows.map((x) => x.spend[c] ?? 0)])),
    value: Object.fromEntries(valueCur.map((c) => [c, d.byDay.rows.map((x) => x.value[c] ?? 0)])),
    joins: d.byDay.rows.map((x) => x.joins),
    campaigns: top.map((x) => x.campaignName ?? x.campaignId),
    costPerJoin: Object.fromEntries(joinCur.map((c) => [c, top.map((x) => x.costPerJoin[c] ?? null)])),
  };
  return page(
    `ROI · ${site.name}`,
    html`<p><a href="/dashboard/sites/${site.id}">← ${site.name}</a></p><h1>ROI · ${site.name}</h1>
<form class="range" method="get" action="/dashboard/sites/${site.id}/roi">
<label>from <input type="date" name="from" value="${r.from}" required></label><label>to <input type="date" name="to" value="${r.to}" required></label>
<label>group by <select name="groupBy">${ROI_GROUP_BYS.map((g) => html`<option value="${g}"${g === r.groupBy ? raw(' selected') : ''}>${GROUP_LABELS[g]}</option>`)}</select></label>
<button>Show</button></form>
<p class="muted">Days ${r.from} to ${r.to}: spend by the ad account's day, visits, joins and conversions by UTC day. A visit belongs to a campaign by <code>utm_id</code>, else the platform's campaign parameter in its URL, else its <code>utm_campaign</code> equal to a campaign's name. Money stays in its currency; ROAS only where spend and value share one.</p>
${r.warnings.length === 0 ? '' : html`<h2>To check</h2><ul class="advice">${r.warnings.map(warning)}</ul>`}
<div class="charts"><div class="chart"><canvas id="chart-spend" role="img" aria-label="Spend and value per currency, and joins, by day"></canvas></div>
<div class="chart"><canvas id="chart-cost" role="img" aria-label="Cost per join of the campaigns with the most joins, per currency"></canvas></div></div>
<table id="roi"><thead>${HEAD}</thead><tbody>${r.rows.map((x) => html`<tr>${cells(label(x, r.groupBy), x)}</tr>`)}</tbody><tfoot><tr>${cells('Total', r.totals)}</tr></tfoot></table>
<p class="muted">Retained: joins still members 7 and 30 days after joining, of the days that old ("–" until then); the cost per retained join divides the spend of those same days.</p>
${dataBlock(chartData)}<script src="/dashboard/assets/chart.umd.min.js"></script><script src="/dashboard/assets/roi.js"></script>`,
    session,
  );
}
