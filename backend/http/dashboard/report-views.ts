import { html, raw } from 'hono/html';
import type { ChannelCoverage } from '../../domain/reports/coverage.js';
import { funnelRates, type Funnel, type FunnelCounts, type GroupBy } from '../../domain/reports/funnel.js';
import { receives } from '../../domain/reports/match-advice.js';
import type { MatchQualityRow } from '../../domain/reports/match-quality.js';
import type { PixelHealth, SpendSourceHealth } from '../../domain/reports/pixel-health.js';
import type { CampaignRetention } from '../../domain/reports/retention.js';
import { page, type Html } from './views.js';

/**
 * The site's Reports page: the funnel (a chart by day, a funnel chart of the totals, the table
 * beneath, a CSV download), retention per campaign, match quality with what to fix, attribution
 * coverage and pixel health. Charts are drawn by Chart.js, served by Capigram itself; the numbers
 * reach the script as a JSON data block (never executed), so the page needs no inline script.
 */
export interface ReportsPageData {
  site: { id: string; name: string };
  groupBy: GroupBy;
  funnel: Funnel;
  byDay: Funnel;
  /** The totals of the period just before, as many days long; null before year 1. */
  previous: { from: string; to: string; totals: FunnelCounts } | null;
  /** Shortcuts to the ranges picked most (today, 7 days, this month…). */
  presets: { label: string; from: string; to: string }[];
  retention: CampaignRetention[];
  matchQuality: MatchQualityRow[];
  coverage: ChannelCoverage[];
  pixels: PixelHealth[];
  /** The site's spend sources, shown under the pixels when it has any. */
  spendSources?: SpendSourceHealth[];
  channelTitles: Record<string, string>;
  now: Date;
}

const GROUP_LABELS: Record<GroupBy, string> = {
  day: 'day',
  utm_source: 'utm_source',
  utm_campaign: 'utm_campaign',
  channel: 'channel',
  platform: 'ad platform',
};

function rate(r: number | null): string {
  return r === null ? '–' : `${(r * 100).toFixed(1)} %`;
}

function money(v: Record<string, number>): string {
  const parts = Object.entries(v).sort(([a], [b]) => a.localeCompare(b));
  return parts.length === 0
    ? '–'
    : parts.map(([c, n]) => `${n.toLocaleString('en-US', { maximumFractionDigits: 2 })} ${c}`).join(' · ');
}

function ago(at: Date | null, now: Date): string {
  if (at === null) return 'none in 30 days';
  const min = Math.round((now.getTime() - at.getTime()) / 60_000);
  return min < 60
    ? `${min} min ago`
    : min < 2880
      ? `${Math.round(min / 60)} h ago`
      : `${Math.round(min / 1440)} days ago`;
}

/** A row's name for people: a channel's title, `(none)` where the visits had no value. */
function keyLabel(groupBy: GroupBy, key: string | null, titles: Record<string, string>): string {
  if (key === null) return groupBy === 'channel' ? '(no channel)' : '(none)';
  if (groupBy === 'channel') return titles[key] ?? key;
  if (groupBy === 'platform' && key === 'none') return 'none (organic or untagged)';
  return key;
}

function funnelCells(label: string, r: FunnelCounts): Html {
  const rates = funnelRates(r);
  return html`<td data-label="${label === 'Total' ? '' : 'group'}">${label}</td><td class="num" data-label="visits">${r.visits}</td>
<td class="num" data-label="invite clicks">${r.inviteClicks}</td><td class="num" data-label="click rate">${rate(rates.clickRate)}</td>
<td class="num" data-label="joins">${r.joins}</td><td class="num" data-label="attributed · organic">${r.attributedJoins} · ${r.organicJoins}</td>
<td class="num" data-label="join rate">${rate(rates.joinRate)}</td><td class="num" data-label="leaves">${r.leaves}</td>
<td class="num" data-label="retained">${r.retained}</td><td class="num" data-label="conversions">${r.conversions}</td>
<td class="num" data-label="value">${money(r.value)}</td>`;
}

/**
 * Up to this many rows the funnel's table is shown open; longer ones (a month by day) are folded
 * under their totals, which keeps the page short on a phone, where each row is a card.
 */
const OPEN_ROWS = 7;

/** The totals in one sentence, above the table: what a glance needs when the rows are folded. */
/** This period's count beside the one before: the change in per cent, or "new" from nothing. */
function change(now: number, before: number): string {
  if (before === 0) return now === 0 ? '±0' : 'new';
  const pct = Math.round(((now - before) / before) * 100);
  return `${pct > 0 ? '+' : pct < 0 ? '−' : '±'}${Math.abs(pct)} %`;
}

/** The headline counts against the period before, each with its change. */
function comparison(t: FunnelCounts, p: NonNullable<ReportsPageData['previous']>): Html {
  const items = (
    [
      ['visits', 'visits'],
      ['inviteClicks', 'invite clicks'],
      ['joins', 'joins'],
      ['retained', 'retained'],
      ['conversions', 'conversions'],
    ] as const
  ).map(
    ([k, label]) =>
      html`<span>${label} ${t[k]} <span class="muted">(${p.totals[k]}, ${change(t[k], p.totals[k])})</span></span>`,
  );
  return html`<p class="compare">Against ${p.from} to ${p.to}: ${items.map((x, i) => (i === 0 ? x : html` · ${x}`))}</p>`;
}

function funnelSummary(t: FunnelCounts): Html {
  const r = funnelRates(t);
  return html`<p class="totals">Total: ${t.visits} visits · ${t.inviteClicks} invite clicks (click rate ${rate(r.clickRate)}) · ${t.joins} joins, ${t.attributedJoins} attributed (join rate ${rate(r.joinRate)}) · ${t.retained} retained · ${t.conversions} conversions · ${money(t.value)}</p>`;
}

const FUNNEL_HEAD = html`<tr><th>group</th><th>visits</th><th>invite clicks</th><th>click rate</th><th>joins</th><th>attributed · organic</th><th>join rate</th><th>leaves</th><th>retained</th><th>conversions</th><th>value</th></tr>`;

/** JSON for a `type="application/json"` block: `<` escaped so no `</script>` can end it early. */
function dataBlock(value: unknown): Html {
  return html`<script type="application/json" id="report-data">${raw(JSON.stringify(value).replace(/</g, '\\u003c'))}</script>`;
}

export function reportsPage(d: ReportsPageData, session: { formToken: string }): Html {
  const { funnel: f, site } = d;
  const q = `from=${f.from}&to=${f.to}&groupBy=${d.groupBy}${f.channelId ? `&channelId=${f.channelId}` : ''}`;
  const rows = f.rows.map(
    (r) => html`<tr>${funnelCells(keyLabel(d.groupBy, r.key, d.channelTitles), r)}</tr>`,
  );
  const retention = d.retention.map(
    (
      r,
    ) => html`<tr><td data-label="campaign">${r.campaign ?? '(none)'}</td><td class="num" data-label="joins">${r.joins}</td>
<td class="num" data-label="after 1 day">${share(r.retained.d1)}</td><td class="num" data-label="after 7 days">${share(r.retained.d7)}</td><td class="num" data-label="after 30 days">${share(r.retained.d30)}</td></tr>`,
  );
  const quality = d.matchQuality.map(
    (
      r,
    ) => html`<tr><td data-label="platform">${r.platform}</td><td data-label="event">${r.eventType}</td><td class="num" data-label="sent">${r.sent}</td>
${(['fbc', 'fbp', 'ip', 'userAgent', 'email', 'phone', 'externalId', 'clickId'] as const).map((k) => html`<td class="num" data-label="${k}">${receives(r.platform, k) ? share(r.shares[k]) : html`<span class="muted" title="not part of what ${r.platform} receives">n/a</span>`}</td>`)}</tr>`,
  );
  const advice = d.matchQuality.flatMap((r) =>
    r.advice.map((a) => html`<li><strong>${r.platform} ${r.eventType}</strong>: ${withCode(a)}</li>`),
  );
  const coverage = d.coverage.map(
    (
      c,
    ) => html`<tr><td data-label="channel">${c.title}${c.isPublic ? ' (public)' : ''}</td><td class="num" data-label="attributed joins">${c.attributedJoins}</td>
<td class="num" data-label="organic joins">${c.organicJoins}</td><td class="num" data-label="attributed share">${share(c.share)}</td><td data-label="">${c.warning ? html`<span class="warn">${c.warning}</span>` : ''}</td></tr>`,
  );
  const pixels = d.pixels.map(
    (
      p,
    ) => html`<tr><td data-label="pixel">${p.label}${p.active ? '' : html` <span class="muted">(inactive)</span>`}</td>
<td data-label="last success">${p.lastSuccessAt === null ? html`<span class="warn">none in 30 days</span>` : ago(p.lastSuccessAt, d.now)}</td>
<td data-label="last error">${p.lastError === null ? html`<span class="muted">none in 30 days</span>` : html`${ago(p.lastErrorAt, d.now)}: <span class="warn">${p.lastError}</span>`}</td>
<td class="num" data-label="last 24 h">${p.last24h.sent} sent · ${p.last24h.failed} failed · ${p.last24h.skipped} skipped${p.last24h.pending > 0 ? ` · ${p.last24h.pending} pending` : ''}</td></tr>`,
  );
  const chartData = {
    days: d.byDay.rows.map((r) => r.key),
    visits: d.byDay.rows.map((r) => r.visits),
    inviteClicks: d.byDay.rows.map((r) => r.inviteClicks),
    joins: d.byDay.rows.map((r) => r.joins),
    conversions: d.byDay.rows.map((r) => r.conversions),
    funnel: {
      visits: f.totals.visits,
      inviteClicks: f.totals.inviteClicks,
      joins: f.totals.joins,
      retained: f.totals.retained,
      conversions: f.totals.conversions,
    },
  };
  return page(
    `Reports · ${site.name}`,
    html`<p><a href="/dashboard/sites/${site.id}">← ${site.name}</a></p><h1>Reports · ${site.name}</h1>
<form class="range" method="get" action="/dashboard/sites/${site.id}/reports">
<label>from <input type="date" name="from" value="${f.from}" required></label><label>to <input type="date" name="to" value="${f.to}" required></label>
<label>group by <select name="groupBy">${(Object.keys(GROUP_LABELS) as GroupBy[]).map((g) => html`<option value="${g}"${g === d.groupBy ? raw(' selected') : ''}>${GROUP_LABELS[g]}</option>`)}</select></label>
<label>channel <select name="channelId"><option value="">all channels</option>${Object.entries(d.channelTitles).map(([id, title]) => html`<option value="${id}"${id === f.channelId ? raw(' selected') : ''}>${title}</option>`)}</select></label>
<button>Show</button><a href="/dashboard/sites/${site.id}/reports.csv?${q}" download>Download CSV</a></form>
<p class="presets">${d.presets.map((r, i) => html`${i === 0 ? '' : ' · '}<a href="/dashboard/sites/${site.id}/reports?from=${r.from}&to=${r.to}&groupBy=${d.groupBy}${f.channelId ? `&channelId=${f.channelId}` : ''}"${r.from === f.from && r.to === f.to ? raw(' aria-current="true"') : ''}>${r.label}</a>`)}</p>
<p class="muted">UTC days ${f.from} to ${f.to}${f.channelId ? html`, channel ${d.channelTitles[f.channelId] ?? f.channelId}` : ''}. Joins count for the campaign and platform of the visit they were traced to; organic joins have none. Values are summed per currency.</p>
<h2>Funnel</h2>
<div class="charts"><div class="chart"><canvas id="chart-days" role="img" aria-label="Visits, invite clicks, joins and conversions by day"></canvas></div>
<div class="chart"><canvas id="chart-funnel" role="img" aria-label="The funnel: visits, invite clicks, joins, retained, conversions"></canvas></div></div>
${funnelSummary(f.totals)}
${d.previous === null ? '' : comparison(f.totals, d.previous)}
<details id="funnel-rows"${rows.length <= OPEN_ROWS ? raw(' open') : ''}><summary>The ${rows.length} rows by ${GROUP_LABELS[d.groupBy]}</summary>
<table id="funnel"><thead>${FUNNEL_HEAD}</thead><tbody>${rows}</tbody><tfoot><tr>${funnelCells('Total', f.totals)}</tr></tfoot></table></details>
<h2>Retention per campaign</h2>
${
  d.retention.length === 0
    ? html`<p class="muted">No join in the range.</p>`
    : html`<table><thead><tr><th>campaign</th><th>joins</th><th>after 1 day</th><th>after 7 days</th><th>after 30 days</th></tr></thead><tbody>${retention}</tbody></table>
<p class="muted">The share of the range's joins still members that long after joining; "–" until that long has passed for a day's joins.</p>`
}
<h2>Match quality</h2>
${d.matchQuality.length === 0 ? html`<p class="muted">No event delivered in the range.</p>` : html`<table><thead><tr><th>platform</th><th>event</th><th>sent</th><th>fbc</th><th>fbp</th><th>IP</th><th>User-Agent</th><th>e-mail</th><th>phone</th><th>external id</th><th>click id</th></tr></thead><tbody>${quality}</tbody></table>`}
${advice.length === 0 ? '' : html`<ul class="advice">${advice}</ul>`}
<h2>Attribution coverage</h2>
${d.coverage.length === 0 ? html`<p class="muted">No active channel.</p>` : html`<table><thead><tr><th>channel</th><th>attributed joins</th><th>organic joins</th><th>attributed share</th><th></th></tr></thead><tbody>${coverage}</tbody></table>`}
<h2>Pixel health</h2>
${d.pixels.length === 0 ? html`<p class="warn">No pixel: nothing is sent to any ad platform.</p>` : html`<table><thead><tr><th>pixel</th><th>last success</th><th>last error</th><th>last 24 h</th></tr></thead><tbody>${pixels}</tbody></table>`}
${spendSourcesBlock(d.spendSources ?? [], d.now)}
${dataBlock(chartData)}<script src="/dashboard/assets/chart.umd.min.js"></script><script src="/dashboard/assets/reports.js"></script>`,
    session,
  );
}

/** Advice writes parameter names in backticks: shown as code. */
function withCode(text: string): Html[] {
  return text.split('`').map((part, i) => (i % 2 === 1 ? html`<code>${part}</code>` : html`${part}`));
}

function share(n: number | null): string {
  return n === null ? '–' : `${Math.round(n * 100)} %`;
}

/** A CSV cell: quoted, and a leading = + - @ neutralised so a spreadsheet does not run it as a formula. */
function cell(v: string | number): string {
  const s = String(v);
  const safe = /^[=+\-@\t\r]/.test(s) && typeof v === 'string' ? `'${s}` : s;
  return /[",\n\r]/.test(safe) || safe !== s ? `"${safe.replace(/"/g, '""')}"` : safe;
}

/** The funnel table as CSV, one column per currency's value. */
export function funnelCsv(f: Funnel, groupBy: GroupBy, titles: Record<string, string>): string {
  const currencies = [...new Set([...f.rows.flatMap((r) => Object.keys(r.value))])].sort();
  const head = [
    groupBy,
    'visits',
    'invite_clicks',
    'joins',
    'attributed_joins',
    'organic_joins',
    'leaves',
    'retained',
    'conversions',
    ...currencies.map((c) => `value_${c}`),
  ];
  const line = (label: string, r: FunnelCounts) =>
    [
      label,
      r.visits,
      r.inviteClicks,
      r.joins,
      r.attributedJoins,
      r.organicJoins,
      r.leaves,
      r.retained,
      r.conversions,
      ...currencies.map((c) => r.value[c] ?? 0),
    ]
      .map(cell)
      .join(',');
  return `${[
    head.join(','),
    ...f.rows.map((r) => line(keyLabel(groupBy, r.key, titles), r)),
    line('total', f.totals),
  ].join('\r\n')}\r\n`;
}

/** Spend sources under the pixels: a failing one says the platform's reason (docs/spend.md). */
function spendSourcesBlock(sources: SpendSourceHealth[], now: Date) {
  if (sources.length === 0) return '';
  const rows = sources.map(
    (
      s,
    ) => html`<tr><td data-label="spend source">${s.label}</td><td data-label="status">${s.status === 'failing' ? html`<span class="warn">failing</span>` : 'ok'}</td>
<td data-label="last synced">${s.lastSyncedAt === null ? html`<span class="muted">not yet</span>` : ago(s.lastSyncedAt, now)}</td>
<td data-label="last error">${s.lastError === null ? '' : html`<span class="warn">${s.lastError}</span>`}</td></tr>`,
  );
  return html`<h3>Spend sources</h3><table id="spend-sources"><thead><tr><th>spend source</th><th>status</th><th>last synced</th><th>last error</th></tr></thead><tbody>${rows}</tbody></table>`;
}
