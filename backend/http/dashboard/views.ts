import { createHash } from 'node:crypto';
import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { LeadJourney, VisitSignals } from '../../domain/dashboard/lead-journey.js';
import type { ConversionLine, SiteDetail, SiteOverview } from '../../domain/dashboard/read-model.js';
import type { HeldRequestLine } from '../../domain/admin/join-requests.js';
import { heldRequestsSection } from './join-requests-view.js';

/**
 * The dashboard's pages, rendered on the server: no script at all, one inline stylesheet allowed
 * by its hash. Every interpolated value goes through hono's `html`, which escapes it.
 */
export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:10px 24px;display:flex;gap:16px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}header form.inline{margin-left:auto}
main{padding:16px 24px;max-width:1200px}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;width:100%;background:#fff;margin:8px 0}
th,td{border:1px solid #dde1e6;padding:5px 8px;text-align:left;vertical-align:top}th{background:#eef0f3}
.num{text-align:right}.warn{color:#a4262c;font-weight:600}.ok{color:#1a7f37}.muted{color:#667085}
.notice{background:#e6f4ea;border:1px solid #1a7f37;padding:8px}.error{background:#fdecea;border:1px solid #a4262c;padding:8px}
form.inline{display:flex;gap:6px;margin:0}input[type=text],input[type=number],input[type=password]{padding:3px 6px}
code{font-size:12px}td{overflow-wrap:anywhere}th,button,h1,h2,h3{overflow-wrap:normal;word-break:normal}
nav.tabs{display:flex;gap:12px;flex-wrap:wrap;margin:8px 0}.chart{position:relative;height:260px;background:#fff;border:1px solid #dde1e6;margin:8px 0}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:12px}form.range{display:flex;flex-wrap:wrap;gap:8px;align-items:end}
form.range label{display:flex;flex-direction:column;font-size:12px}ul.advice{margin:4px 0 12px;padding-left:20px}
@media (max-width:700px){main{padding:12px}header{flex-wrap:wrap;padding:10px 12px}table,tbody,tr,td{display:block;width:auto}
thead,tr:has(>th){display:none}tr{border:1px solid #dde1e6;margin:0 0 8px;background:#fff}td{border:0;border-bottom:1px solid #eef0f3}
tr:has(>td[data-label]){display:grid;grid-template-columns:1fr 1fr}tr:has(>td[data-label])>td:first-child{grid-column:1/-1;font-weight:600}
td[data-label]::before{content:attr(data-label);display:block;font-size:12px;color:#667085}.num{text-align:left}}`;

/** For the Content-Security-Policy: the one stylesheet the pages may use. */
export const STYLE_HASH = `sha256-${createHash('sha256').update(STYLE).digest('base64')}`;

export const NOTICES = {
  'value-saved': 'The value was saved and the conversion dispatched.',
  'send-retried': 'The send is back in the queue.',
  'failed-retried': "The failed sends of the site's active pixels are back in the queue.",
  'request-approved': 'The join request was approved with Telegram.',
  'request-declined': 'The join request was declined with Telegram.',
} as const;
export type NoticeKey = keyof typeof NOTICES;

/** What a signed-in page knows of its session: the form token, and whether to hide the forms that change things (a viewer's). */
export interface PageSession {
  formToken: string;
  readOnly?: boolean | undefined;
}

export function page(title: string, body: Html, session?: PageSession): Html {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${title} · Capigram</title><style>${raw(STYLE)}</style></head>
<body><header><a href="/dashboard">Capigram</a><span class="muted">operator dashboard</span>${
    session
      ? html`<form class="inline" method="get" action="/dashboard/leads"><input type="text" name="user" inputmode="numeric" placeholder="Telegram user id" aria-label="Telegram user id" size="16"><button>Find</button></form><a href="/dashboard/audit">Audit log</a>
<form method="post" action="/dashboard/logout"><input type="hidden" name="_token" value="${session.formToken}"><button>Sign out</button></form>`
      : ''
  }</header><main>${body}</main></body></html>`;
}

function when(d: Date): string {
  return d.toISOString().replace('T', ' ').slice(0, 19);
}

function bad(n: number, label: string): Html {
  return n > 0 ? html`<span class="warn">${n} ${label}</span>` : html`<span class="muted">0 ${label}</span>`;
}

export function overviewPage(sites: SiteOverview[], sinceHours: number, session: PageSession): Html {
  const rows = sites.map(
    (
      s,
    ) => html`<tr><td data-label="account">${s.accountName}</td><td data-label="site"><a href="/dashboard/sites/${s.siteId}">${s.name}</a><br><code>${s.websiteId}</code></td>
<td data-label="domains">${s.domains.join(', ')}</td><td class="num" data-label="channels">${s.channels}${s.channelsWithoutInviteRights > 0 ? html`<br><span class="warn">${s.channelsWithoutInviteRights} without invite rights</span>` : ''}</td>
<td class="num" data-label="active pixels">${s.activePixels === 0 ? html`<span class="warn">none</span>` : s.activePixels}</td>
<td class="num" data-label="today (UTC)">visits ${s.today.visits} · joins ${s.today.joins} · conversions ${s.today.conversions}<br><span class="muted">yesterday by this time: ${s.yesterdayByNow.visits} · ${s.yesterdayByNow.joins} · ${s.yesterdayByNow.conversions}</span></td>
<td class="num" data-label="sends, last ${sinceHours} h">${s.sends.sent} sent · ${s.sends.pending} pending · ${s.sends.skipped} skipped · ${s.sends.failed} failed</td>
<td data-label="visits (UTC)">${s.install.lastVisitAt === null ? html`<span class="warn">waiting for the first visit</span>` : html`last ${when(new Date(s.install.lastVisitAt))}`}${
      s.install.refusedHosts.length > 0
        ? html`<br><span class="warn">refused: ${s.install.refusedHosts.map((h) => h.host).join(', ')}</span>`
        : ''
    }</td>
<td data-label="needs attention">${bad(s.awaitingValue, 'awaiting a value')}<br>${bad(s.failedSends, 'failed sends')}</td></tr>`,
  );
  return page(
    'Sites',
    html`<h1>Sites</h1>${
      sites.length === 0
        ? html`<p>No site yet: create one with <code>npm run admin -- site create</code>.</p>`
        : html`<table><thead><tr><th>account</th><th>site</th><th>domains</th><th>channels</th><th>active pixels</th><th>today (UTC)</th><th>sends, last ${sinceHours} h</th><th>visits (UTC)</th><th>needs attention</th></tr></thead><tbody>${rows}</tbody></table>`
    }`,
    session,
  );
}

function eventName(c: ConversionLine): string {
  return c.eventType === 'Custom' && c.customEventName ? `Custom: ${c.customEventName}` : c.eventType;
}

function money(c: ConversionLine): string {
  return c.value === null ? '' : `${c.value} ${c.currency ?? ''}`.trim();
}

function conversionRows(list: ConversionLine[]): Html[] {
  return list.map(
    (
      c,
    ) => html`<tr><td data-label="received (UTC)">${when(c.receivedAt)}</td><td data-label="event">${eventName(c)}</td><td data-label="value" class="num">${money(c)}</td><td data-label="Telegram user">${c.telegramUserId}</td>
<td data-label="channel">${c.channelTitle ?? (c.hasChannel ? html`<span class="muted">deleted</span>` : html`<span class="muted">none (bot entry)</span>`)}</td><td data-label="source">${c.source}${c.coldLead ? ' (cold)' : ''}</td>
<td data-label="attributed">${c.attributed ? html`<span class="ok">yes</span>` : html`<span class="muted">no</span>`}</td>
<td data-label="status">${c.awaitingValue ? html`<span class="warn">awaiting value</span>` : c.capiStatus}</td><td data-label="id"><code>${c.conversionId}</code></td></tr>`,
  );
}

const CONVERSION_HEAD = html`<tr><th>received (UTC)</th><th>event</th><th>value</th><th>Telegram user</th><th>channel</th><th>source</th><th>attributed</th><th>status</th><th>id</th></tr>`;

export interface SitePageState {
  formToken: string;
  /** A viewer's page: no form that changes anything. */
  readOnly?: boolean | undefined;
  notice?: NoticeKey | undefined;
  error?: string | undefined;
  /** What the value form held when it was refused, to show it again. */
  valueForm?: { conversionId: string; value: string; currency: string } | undefined;
  /** Join requests the site's channels' rules held for the operator. */
  heldRequests?: HeldRequestLine[] | undefined;
}

/** Whether the tracker is installed: visits seen, or the wait for the first; hosts refused. */
function installSection(d: SiteDetail): Html {
  const { install, site } = d;
  const seen =
    install.firstVisitAt === null || install.lastVisitAt === null
      ? html`<p class="warn" id="install-status">Waiting for the first visit: put <code>tracker.js</code> with <code>data-website-id="${site.website_id}"</code> on a page of ${site.domains.join(', ')} (or the proxy in front of it) and open that page.</p>`
      : html`<p id="install-status"><span class="ok">Visits arrive</span>: first ${when(new Date(install.firstVisitAt))}, latest ${when(new Date(install.lastVisitAt))} (UTC, to the minute).</p>`;
  const refused =
    install.refusedHosts.length === 0
      ? ''
      : html`<p class="warn">Requests from pages on other domains were refused (add the domain to the site if it is yours: <code>npm run admin -- site update --site ${site.id} --add-domain …</code>):</p>
<table id="refused-hosts"><thead><tr><th>host</th><th>refused</th><th>first (UTC)</th><th>latest</th></tr></thead><tbody>${install.refusedHosts.map(
          (h) =>
            html`<tr><td><code>${h.host}</code></td><td class="num">${h.refused}</td><td>${when(new Date(h.firstAt))}</td><td>${when(new Date(h.lastAt))}</td></tr>`,
        )}</tbody></table>`;
  return html`<h2>Install</h2>${seen}${refused}`;
}

export function sitePage(d: SiteDetail, state: SitePageState): Html {
  const { site } = d;
  const action = (path: string) => `/dashboard/sites/${site.id}/${path}`;
  const token = html`<input type="hidden" name="_token" value="${state.formToken}">`;
  const channels = d.channels.map(
    (
      c,
    ) => html`<tr><td>${c.title}${c.isDefault ? ' (default)' : ''}</td><td><code>${c.telegramChannelId}</code></td><td>${c.eventType}</td>
<td>${c.botIsAdmin === false || c.botCanInvite === false ? html`<span class="warn">${c.botStatus ?? 'not admin'}: cannot invite</span>` : c.botIsAdmin === null ? html`<span class="muted">unknown</span>` : html`<span class="ok">admin</span>`}</td>
<td class="num">${c.poolSize === 0 ? html`<span class="warn">0</span>` : c.poolSize}</td><td><code>${c.channelId}</code></td></tr>`,
  );
  const pixels = d.pixels.map(
    (
      p,
    ) => html`<tr><td>${p.platform}</td><td><code>${JSON.stringify(p.publicConfig)}</code></td><td>${p.testEventCode ?? ''}</td>
<td>${!p.active ? html`<span class="muted">inactive</span>` : p.testEventCode ? html`<span class="warn" title="events carry the test event code: the platform shows them as test events">test mode</span>` : html`<span class="ok">active</span>`}</td><td><code>${p.pixelId}</code></td></tr>`,
  );
  const awaiting = d.awaiting.map((c) => {
    const kept = state.valueForm?.conversionId === c.conversionId ? state.valueForm : undefined;
    return html`<tr><td>${when(c.receivedAt)}</td><td>${c.telegramUserId}</td><td>${c.channelTitle ?? ''}</td><td><code>${c.conversionId}</code></td>
<td>${
      state.readOnly
        ? ''
        : html`<form class="inline" method="post" action="${action(`conversions/${c.conversionId}/value`)}">${token}
<input type="number" name="value" step="any" min="0" required placeholder="value" value="${kept?.value ?? ''}" aria-label="value">
<input type="text" name="currency" required maxlength="3" size="4" placeholder="USD" value="${kept?.currency ?? c.currency ?? ''}" aria-label="currency">
<button>Submit value</button></form>`
    }</td></tr>`;
  });
  const failed = d.failedSends.map(
    (
      s,
    ) => html`<tr><td>${when(s.updatedAt)}</td><td>${s.platform}</td><td class="num">${s.attempts}</td><td>${s.reason ?? ''}</td><td>${s.subject}</td>
<td>${state.readOnly ? '' : html`<form class="inline" method="post" action="${action(`sends/${s.sendId}/retry`)}">${token}<button>Retry</button></form>`}</td></tr>`,
  );
  return page(
    site.name,
    html`<p><a href="/dashboard">← all sites</a></p><h1>${site.name}</h1>
<nav class="tabs"><strong>Operations</strong><a href="/dashboard/sites/${site.id}/reports">Reports: funnel, match quality, pixel health</a><a href="/dashboard/sites/${site.id}/roi">ROI: spend, cost per join, ROAS</a><a href="/dashboard/sites/${site.id}/events">Live events</a></nav>
${state.notice ? html`<p class="notice">${NOTICES[state.notice]}</p>` : ''}${state.error ? html`<p class="error">${state.error}</p>` : ''}
<p>Account ${site.accountName} · websiteId <code>${site.website_id}</code> · siteId <code>${site.id}</code> · domains ${site.domains.join(', ')} · dedup window ${site.dedup_window_seconds} s</p>
${installSection(d)}
<h2>Awaiting a value (${d.awaiting.length})</h2>
${d.awaiting.length === 0 ? html`<p class="muted">Nothing waits for a value.</p>` : html`<table><thead><tr><th>received (UTC)</th><th>Telegram user</th><th>channel</th><th>conversion</th><th>value</th></tr></thead><tbody>${awaiting}</tbody></table>`}
${state.heldRequests ? heldRequestsSection(site.id, state.heldRequests, state.readOnly ? null : state.formToken) : ''}
<h2>Failed sends (${d.failedSends.length === d.failedLimit ? `${d.failedLimit} newest` : d.failedSends.length})</h2>
${d.failedSends.length === 0 ? html`<p class="muted">No failed send.</p>` : html`${state.readOnly ? '' : html`<form method="post" action="${action('sends/retry-failed')}">${token}<p><button>Retry every failed send</button> <span class="muted">of the site's active pixels, after fixing what made them fail (a token, say)</span></p></form>`}<table><thead><tr><th>last try (UTC)</th><th>pixel</th><th>attempts</th><th>reason</th><th>for</th><th></th></tr></thead><tbody>${failed}</tbody></table>`}
<h2>Latest conversions</h2>
${d.recent.length === 0 ? html`<p class="muted">No conversion yet.</p>` : html`<table><thead>${CONVERSION_HEAD}</thead><tbody>${conversionRows(d.recent)}</tbody></table>`}
<h2>Channels</h2>
${d.channels.length === 0 ? html`<p class="warn">No channel: add one with <code>npm run admin -- channel add</code>.</p>` : html`<table><thead><tr><th>title</th><th>Telegram id</th><th>event</th><th>bot</th><th>free invite links</th><th>id</th></tr></thead><tbody>${channels}</tbody></table>`}
<h2>Pixels</h2>
${d.pixels.length === 0 ? html`<p class="warn">No pixel: nothing is sent to any ad platform. Add one with <code>npm run admin -- pixel add</code>.</p>` : html`<table><thead><tr><th>platform</th><th>configuration</th><th>test event code</th><th>state</th><th>id</th></tr></thead><tbody>${pixels}</tbody></table>`}`,
    state,
  );
}

export function notFoundPage(what: string, session: PageSession): Html {
  return page(
    'Not found',
    html`<h1>Not found</h1><p>${what}</p><p><a href="/dashboard">All sites</a></p>`,
    session,
  );
}

function visitCell(v: VisitSignals | null): Html {
  if (v === null) return html`<span class="muted">no visit</span>`;
  return html`${when(v.at)}${v.landingPage ? html`<br><code>${v.landingPage}</code>` : ''}${v.utmSource || v.utmCampaign ? html`<br>utm ${[v.utmSource, v.utmCampaign].filter(Boolean).join(' / ')}` : ''}<br>${
    v.signals.length === 0 ? html`<span class="warn">no signal</span>` : v.signals.join(', ')
  }`;
}

/** Everything known about one Telegram user, or the search form's answer when there is nothing. */
export function journeyPage(
  query: string,
  journey: LeadJourney | null,
  session: PageSession,
  error?: string,
  notice?: string,
): Html {
  const heading = html`<h1>Telegram user ${query}</h1>${notice ? html`<p class="ok">${notice}</p>` : ''}${journey !== null && error ? html`<p class="error">${error}</p>` : ''}`;
  if (journey === null)
    return page('Find a user', html`${heading}${error ? html`<p class="error">${error}</p>` : ''}`, session);
  const empty =
    journey.leads.length === 0 && journey.memberships.length === 0 && journey.conversions.length === 0;
  if (empty)
    return page(
      `User ${query}`,
      html`${heading}<p>Nothing is known about this user: no join, no conversion, on any site.</p>`,
      session,
    );
  const leads = journey.leads.map(
    (
      l,
    ) => html`<tr><td><a href="/dashboard/sites/${l.siteId}">${l.siteName}</a></td><td>${when(l.firstSeenAt)}</td><td>${when(l.lastSeenAt)}</td><td>${l.externalUserId ?? ''}</td>
<td>${session.readOnly ? '' : html`<form class="inline" method="post" action="/dashboard/sites/${l.siteId}/leads/${query}/erase"><input type="hidden" name="_token" value="${session.formToken}"><label><input type="checkbox" name="confirm" value="yes" required> erase for good</label><button>Erase data</button></form>`}</td></tr>`,
  );
  const memberships = journey.memberships.map(
    (
      m,
    ) => html`<tr><td>${when(m.at)}</td><td>${m.siteName}</td><td>${m.channelTitle}</td><td>${m.kind}${m.viaJoinRequest ? ' (join request)' : ''}</td>
<td>${m.kind === 'leave' ? '' : m.attributed ? html`<span class="ok">yes</span>` : html`<span class="warn">no</span>${m.organicReason === null ? '' : html`: <span class="muted">${m.organicReason}</span>`}`}</td><td>${visitCell(m.visit)}</td></tr>`,
  );
  const conversions = journey.conversions.map(
    (
      c,
    ) => html`<tr><td>${when(c.receivedAt)}</td><td>${c.siteName}</td><td>${c.channelTitle ?? ''}</td><td>${c.eventType}</td><td class="num">${c.value === null ? '' : `${c.value} ${c.currency ?? ''}`}</td>
<td>${c.source}${c.coldLead ? ' (cold)' : ''}</td><td>${c.visit !== null ? visitCell(c.visit) : c.override.length > 0 ? html`override: ${c.override.join(', ')}` : html`<span class="warn">none</span>`}</td>
<td>${c.awaitingValue ? html`<span class="warn">awaiting value</span>` : c.capiStatus}</td>
<td>${c.sends.length === 0 ? html`<span class="muted">none</span>` : c.sends.map((x) => html`<div>${x.pixel}: ${x.status}${x.attempts > 1 ? ` (${x.attempts} attempts)` : ''}${x.reason ? html` <span class="muted">${x.reason}</span>` : ''}</div>`)}${c.piiWarnings.map((w) => html`<div class="muted">not sent: ${w}</div>`)}</td>
<td><code>${c.conversionId}</code></td></tr>`,
  );
  return page(
    `User ${query}`,
    html`${heading}
<h2>Leads</h2>${journey.leads.length === 0 ? html`<p class="muted">No lead row.</p>` : html`<table><thead><tr><th>site</th><th>first seen (UTC)</th><th>last seen</th><th>external id</th><th>erasure (on request: identifiers go, counts stay)</th></tr></thead><tbody>${leads}</tbody></table>`}
<h2>Joins and leaves</h2>${journey.memberships.length === 0 ? html`<p class="muted">None seen by a bot.</p>` : html`<table><thead><tr><th>when (UTC)</th><th>site</th><th>channel</th><th>what</th><th>attributed</th><th>visit (signals it carried)</th></tr></thead><tbody>${memberships}</tbody></table>`}
<h2>Conversions</h2>${journey.conversions.length === 0 ? html`<p class="muted">None.</p>` : html`<table><thead><tr><th>received (UTC)</th><th>site</th><th>channel</th><th>event</th><th>value</th><th>source</th><th>attribution</th><th>status</th><th>sends</th><th>id</th></tr></thead><tbody>${conversions}</tbody></table>`}`,
    session,
  );
}
